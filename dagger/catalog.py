"""The plugins Dagger ships, registered by the names users write: the sources by a stream's ``SOURCE_NAME``, the
sinks by ``SINK_TYPE``; Spark's Python data sources registered with a session; and a job's sinks built from its
bound config.

The contracts and registries are :mod:`dagger.plugins`; a built-in plugin is its connector's package
(:mod:`dagger.kafka`, :mod:`dagger.parquet`, :mod:`dagger.influx`, :mod:`dagger.bigquery`, the log sink) and its
registration below. :mod:`dagger.job.binding` imports this module before it looks any plugin up.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from dagger.bigquery.settings import BigQuerySinkSettings
from dagger.bigquery.sink import BigQuerySink
from dagger.influx.settings import InfluxSinkSettings
from dagger.influx.sink import InfluxSink
from dagger.kafka.dead_letters import job_dead_letters
from dagger.kafka.sink import KafkaSink, KafkaSinkSettings
from dagger.kafka.source import KafkaSource
from dagger.parquet.source import ParquetSource
from dagger.plugins.sink import SINKS, SinkEnv, register_sink
from dagger.plugins.source import register_source
from dagger.schema.confluent import ConfluentSettings
from dagger.sinks.log import LogSink, LogSinkSettings

if TYPE_CHECKING:
    import pyarrow as pa

    from dagger.config.model import JobConfig, SinkConfig
    from dagger.plugins.sink import Sink
    from dagger.schema.descriptor_sets import DescriptorSet

for _source in (KafkaSource, ParquetSource):
    for _name in _source.names:
        register_source(_name, _source.settings, _source)


register_sink("log", LogSinkSettings, LogSink.from_settings)
register_sink("kafka", KafkaSinkSettings, KafkaSink.from_settings)
register_sink("influx", InfluxSinkSettings, InfluxSink.from_settings)
register_sink("bigquery", BigQuerySinkSettings, BigQuerySink.from_settings)


def build_sink(entry: SinkConfig, env: SinkEnv) -> Sink:
    """The sink one bound ``SINKS`` entry (or the single-sink keys) describes; ``env``: what the job's sinks share."""
    return SINKS.plugins()[entry.SINK_TYPE].build(entry.settings, env)


def sink_problems(sinks: list[Sink], schema: pa.Schema) -> list[str]:
    """Why the output (``schema``) cannot be written to each of ``sinks``; with several sinks, each problem names
    its sink (the keys in a message are every sink's)."""
    problems = []
    for sink in sinks:
        prefix = f"sink '{sink.display_name}': " if len(sinks) > 1 else ""
        problems.extend(prefix + problem for problem in sink.check(schema))
    return problems


def build_sinks(config: JobConfig, descriptors: DescriptorSet) -> list[Sink]:
    """The sinks a job writes to (``SINKS``, or the single-sink keys), built from its bound config."""

    dead_letter = job_dead_letters(config)
    # the registry's keys are the job's; asked of it only where a sink writes Confluent's wire format
    needs_registry = any(getattr(entry.settings, "needs_registry", False) for _, entry in config.sink_configs)
    registry = asdict(ConfluentSettings.from_config(config)) if needs_registry else None
    # SPARK_PROTOBUF_CODEC other than jvm: ptars in Dagger's writers (auto: the records are there anyway)
    env = SinkEnv(descriptors, registry, jvm_codecs=config.SPARK_PROTOBUF_CODEC == "jvm")
    sinks = []
    for name, entry in config.sink_configs:
        sink = build_sink(entry, env).bind(name, dead_letter, frozenset(entry.SINK_ERROR_TYPES_FOR_FAILURE))
        sinks.append(sink)
    return sinks
