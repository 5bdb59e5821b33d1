"""Sinks, registered by the name users write in ``SINK_TYPE``."""

from __future__ import annotations

from typing import Any

from dagger.errors import DaggerConfigError
from dagger.sinks.base import Sink, SinkWriter
from dagger.sinks.kafka import KafkaSink
from dagger.sinks.log import LogSink

#: SINK_TYPE value → sink class. Add a sink by registering its class here (or with :func:`register_sink`).
SINKS: dict[str, type[Sink]] = {"log": LogSink, "kafka": KafkaSink}


def register_sink(cls: type[Sink]) -> type[Sink]:
    """Register a sink class under its ``name`` (usable as a decorator)."""
    SINKS[cls.name] = cls
    return cls


def build_sinks(config: Any, descriptors: Any) -> list[Sink]:
    """The sinks a job writes to, built from its config."""
    cls = SINKS.get(config.SINK_TYPE)
    if cls is None:
        raise DaggerConfigError(
            f"SINK_TYPE: {config.SINK_TYPE!r} is not available in this version; available: {', '.join(sorted(SINKS))}"
        )
    return [cls.from_config(config, descriptors)]


__all__ = ["SINKS", "Sink", "SinkWriter", "build_sinks", "register_sink"]
