"""Sinks, registered by the name users write in ``SINK_TYPE``."""

from __future__ import annotations

from typing import Any

from dagger.errors import DaggerConfigError
from dagger.sinks.base import RejectedRows, Sink, SinkWriter
from dagger.sinks.bigquery import BigQuerySink
from dagger.sinks.influx import InfluxSink
from dagger.sinks.kafka import KafkaSink
from dagger.sinks.log import LogSink

#: SINK_TYPE value → sink class. Add a sink by registering its class here (or with :func:`register_sink`).
SINKS: dict[str, type[Sink]] = {"log": LogSink, "kafka": KafkaSink, "influx": InfluxSink, "bigquery": BigQuerySink}


def register_sink(cls: type[Sink]) -> type[Sink]:
    """Register a sink class under its ``name`` (usable as a decorator)."""
    SINKS[cls.name] = cls
    return cls


def build_sinks(config: Any, descriptors: Any) -> list[Sink]:
    """The sinks a job writes to (``SINKS``, or the single-sink keys), built from its config."""
    from dagger.dead_letter import DeadLetterSpec

    dead_letter = DeadLetterSpec.from_config(config)
    sinks = []
    for name, settings in config.sink_configs:
        cls = SINKS.get(settings.SINK_TYPE)
        if cls is None:
            raise DaggerConfigError(
                f"SINK_TYPE: {settings.SINK_TYPE!r} is not available in this version; available: "
                f"{', '.join(sorted(SINKS))}"
            )
        sink = cls.from_config(settings, descriptors)
        sink.label = name
        sink.dead_letter = dead_letter
        sink.fail_on = frozenset(settings.SINK_ERROR_TYPES_FOR_FAILURE)
        sinks.append(sink)
    return sinks


__all__ = ["SINKS", "RejectedRows", "Sink", "SinkWriter", "build_sinks", "register_sink"]
