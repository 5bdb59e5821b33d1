"""Spark's real-time mode for the jobs that can run in it (``SPARK_TRIGGER_MODE=real-time``, ``dagger run
--real-time``): see docs/realtime.md.

Real-time mode takes Spark's Kafka source and sink and no Python in the query, and on Spark 4.2 stateless
queries only. Such a job's streams are read by Spark's Kafka source and decoded by ``from_json`` (JSON streams;
protobuf is decoded by ptars in Python workers, since Maven Central serves no spark-protobuf), and its one Kafka
sink writes ``to_json`` through Spark's Kafka sink. :func:`refusals` names whatever keeps a job out.

Runs on the driver (planning); the query then runs in the JVM alone.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from dagger.serde.types import VALIDITY_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig

#: plan nodes that run Python: real-time mode's operator allowlist has none of them
_PYTHON_NODES = ("PythonUDF", "PythonUDTF", "MapInArrow", "MapInPandas", "FlatMapGroupsInPandas", "PythonDataSource")


def stream_refusals(stream: StreamConfig) -> list[str]:
    """Why ``stream`` cannot be read in real-time mode (empty: it can)."""
    from dagger.plugins.source import source_of
    from dagger.sources.kafka import KafkaSource

    table = stream.INPUT_SCHEMA_TABLE
    if not isinstance(source_of(stream), KafkaSource):
        return [f"STREAMS[{table}]: real-time mode reads Kafka streams only (Spark's Kafka source)"]
    out = []
    if stream.INPUT_DATATYPE == "AVRO" or getattr(stream.format, "INPUT_SCHEMA_WIRE_FORMAT", "plain") != "plain":
        out.append(
            f"STREAMS[{table}]: real-time mode reads plain JSON records only; this stream's "
            f"{stream.INPUT_DATATYPE} records (wire format {stream.format.INPUT_SCHEMA_WIRE_FORMAT}) are read by "
            "our Kafka reader, which runs in micro-batches"
        )
    elif stream.INPUT_DATATYPE != "JSON":
        out.append(
            f"STREAMS[{table}]: INPUT_DATATYPE={stream.INPUT_DATATYPE} is decoded by ptars in Python workers, and "
            "real-time mode runs no Python (Spark's JVM protobuf decoder, spark-protobuf, is not served by Maven "
            "Central); INPUT_DATATYPE=JSON streams are decoded in the JVM"
        )
    policy = stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY
    if policy == "dead-letter":
        out.append(
            f"STREAMS[{table}]: SOURCE_KAFKA_INVALID_RECORD_POLICY=dead-letter writes a second output, and a "
            "real-time query has one sink; use fail or drop"
        )
    return out


def refusals(config: JobConfig, bounded: bool, available_now: bool, reads_event_time: bool, df: Any) -> list[str]:
    """Why the job cannot run in real-time mode, each naming what to change (empty: it can)."""
    out: list[str] = []
    if bounded or available_now:
        out.append("real-time mode runs unbounded streams: not with --available-now, --from/--to or ending offsets")
    for stream in config.STREAMS:
        out.extend(stream_refusals(stream))
    if reads_event_time:
        out.append(
            "the SQL groups, joins, windows or deduplicates: Spark 4.2's real-time mode runs stateless queries only "
            "(projections, filters, unions, broadcast joins with static tables; Spark 4.3 adds aggregations)"
        )
    if config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_POSTPROCESSOR_ENABLE:
        out.append("pre- and post-processors run in Python workers; real-time mode runs no Python")
    plan = _analyzed_plan(df)
    python = sorted({node for node in _PYTHON_NODES if node in plan})
    if python:
        out.append(f"the query runs Python ({', '.join(python)}: a Python UDF or Longbow); real-time mode runs none")
    sinks = config.sink_configs
    if len(sinks) != 1 or sinks[0][1].SINK_TYPE != "kafka":
        out.append("real-time mode writes one Kafka sink (SINK_TYPE=kafka); SINKS with several, or other types, no")
    else:
        sink = sinks[0][1].settings
        if sink.SINK_KAFKA_DATA_TYPE != "JSON":
            out.append(
                "SINK_KAFKA_DATA_TYPE=PROTO is encoded by ptars in Python workers; real-time mode writes "
                "SINK_KAFKA_DATA_TYPE=JSON (to_json in the JVM)"
            )
        if sink.SINK_KAFKA_JSON_SCHEMA:
            out.append("SINK_KAFKA_JSON_SCHEMA shapes records in Python; leave it out in real-time mode")
    return out


def _analyzed_plan(df: Any) -> str:
    """The analyzed logical plan with its node and expression classes (a streaming plan cannot be optimized
    outside a running query)."""
    if df is None:
        return ""
    analyzed = df._jdf.queryExecution().analyzed()
    try:
        return analyzed.toJSON()
    except Exception:  # noqa: BLE001 - a node without a JSON form: its text still names Python nodes
        return analyzed.toString()


def _kafka_options(stream: StreamConfig, config: JobConfig, resolve: bool = True) -> dict[str, str]:
    """Spark's Kafka source options from a stream's keys: Dagger's ``SOURCE_KAFKA_CONSUMER_CONFIG_*`` are Kafka's
    Java client settings, which Spark's source takes as ``kafka.<setting>``. Spark uses the start only when the
    checkpoint has no offsets yet (a first run); ``resolve=False`` (``dagger validate``) leaves the group's offsets
    unasked."""
    from dagger.sources.kafka.positions import start_position

    s = stream.settings
    options = {
        "kafka.bootstrap.servers": s.SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS,
        # anchored: Spark's source matches a pattern anywhere in a topic's name, Dagger (as Kafka's own consumer
        # and our reader) matches whole names
        "subscribePattern": anchored(s.SOURCE_KAFKA_TOPIC_NAMES),
        "includeHeaders": "false",
    }
    prefix = "SOURCE_KAFKA_CONSUMER_CONFIG_"
    for key in sorted(type(s).model_fields):
        value = getattr(s, key)
        if not key.startswith(prefix) or value in (None, ""):
            continue
        name = key[len(prefix) :].lower().replace("_", ".")
        if name.startswith(("security.", "sasl.", "ssl.")):
            options[f"kafka.{name}"] = str(value)
    for key, value in s.SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS.items():
        options[f"kafka.{key}"] = str(value)
    position = start_position(stream)
    if position.kind == "timestamp":
        options["startingTimestamp"] = str(position.timestamp_ms)
    elif position.kind == "offsets":
        options["startingOffsets"] = json.dumps(position.offsets)
    elif position.kind in ("earliest", "latest"):
        options["startingOffsets"] = position.kind
    else:  # group: Spark's source has no group of its own; a first run starts where the runner last committed
        options["startingOffsets"] = (
            group_offsets(stream, config) if resolve else s.SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET
        )
    return options


def anchored(pattern: str) -> str:
    """``pattern`` matching whole topic names only, in Spark's ``subscribePattern``."""
    return f"^(?:{pattern})$"


def group_offsets(stream: StreamConfig, config: JobConfig) -> str:
    """``startingOffsets`` for a stream that starts at its consumer group's offsets: every matching partition's
    committed offset (else ``AUTO_OFFSET_RESET``), as our reader resolves them; the keyword when no topic matches
    yet."""
    from dagger.sources.kafka import driver_reader

    reader = driver_reader(stream, config)
    try:
        offsets = {k: v for k, v in reader.initialOffset().items() if ":" in k}
    finally:
        reader.stop()
    if not offsets:
        return stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET
    nested: dict[str, dict[str, int]] = {}
    for key, offset in offsets.items():
        topic, _, partition = key.rpartition(":")
        nested.setdefault(topic, {})[partition] = offset
    return json.dumps(nested)


def tagged_progress(progress: dict[str, Any], config: JobConfig) -> dict[str, Any]:
    """A real-time query's progress with each Kafka source's offsets in our reader's form
    (``{"@table": table, "topic:partition": offset}``), so metrics (rows and lag per stream) and group commits read
    it as they read a micro-batch's. Spark names a source by its pattern (``KafkaV2[SubscribePattern[p]]``): the
    n-th source of a pattern is the n-th stream of that pattern in ``STREAMS``."""
    from dagger.sources.kafka.spec import STREAM_KEY

    by_pattern: dict[str, list[str]] = {}
    for stream in config.STREAMS:
        pattern = anchored(stream.settings.SOURCE_KAFKA_TOPIC_NAMES)
        by_pattern.setdefault(pattern, []).append(stream.INPUT_SCHEMA_TABLE)
    seen: dict[str, int] = {}
    sources = []
    for source in progress.get("sources") or []:
        found = re.fullmatch(r"KafkaV2\[SubscribePattern\[(.*)\]\]", str(source.get("description", "")))
        if found is None or not by_pattern.get(found.group(1)):
            sources.append(source)
            continue
        pattern = found.group(1)
        index = seen[pattern] = seen.get(pattern, -1) + 1
        tables = by_pattern[pattern]
        if index >= len(tables):
            sources.append(source)
            continue
        flat = {}
        for key in ("startOffset", "endOffset", "latestOffset"):
            value = source.get(key)
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    value = None
            if isinstance(value, dict):
                flat[key] = {
                    STREAM_KEY: tables[index],
                    **{f"{t}:{p}": int(o) for t, parts in value.items() for p, o in (parts or {}).items()},
                }
        sources.append({**source, **flat})
    return {**progress, "sources": sources}


def json_stream(spark: SparkSession, stream: StreamConfig, config: JobConfig, resolve: bool = True) -> DataFrame:
    """A JSON stream read by Spark's Kafka source: the table's columns (the JSON Schema's properties, the validity
    flag, rowtime), decoded by ``from_json``; an undecodable record fails the query naming topic, partition and
    offset (``fail``), or is marked invalid (``drop``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    from dagger.serde.json_schema import json_struct

    rowtime = config.FLINK_ROWTIME_ATTRIBUTE_NAME
    key = f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].INPUT_SCHEMA_JSON_SCHEMA"
    record = json_struct(stream.format.INPUT_SCHEMA_JSON_SCHEMA or "", key)
    reader = spark.readStream.format("kafka")
    for name, value in _kafka_options(stream, config, resolve).items():
        reader = reader.option(name, value)
    raw = reader.load()
    parsed = raw.select(
        F.from_json(F.col("value").cast("string"), record, {"mode": "PERMISSIVE"}).alias("r"),
        "topic",
        "partition",
        "offset",
    )
    time_field = stream.format.INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME
    valid = F.col("r").isNotNull()
    if time_field:
        valid = valid & F.col(f"r.`{time_field}`").isNotNull()
    if stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY == "fail":
        message = F.concat(
            F.lit(f"stream '{stream.INPUT_SCHEMA_TABLE}': record at topic "),
            F.col("topic"),
            F.lit(" partition "),
            F.col("partition").cast("string"),
            F.lit(" offset "),
            F.col("offset").cast("string"),
            F.lit(
                " cannot be decoded as JSON of INPUT_SCHEMA_JSON_SCHEMA. Set SOURCE_KAFKA_INVALID_RECORD_POLICY to "
                "'drop' to keep the job running past undecodable records."
            ),
        )
        parsed = parsed.where(F.assert_true(valid, message).isNull())
    columns = [F.col(f"r.`{f.name}`").alias(f.name) for f in record.fields]
    if time_field is None:
        event = F.lit(None).cast(TimestampType())
    elif isinstance(record[time_field].dataType, TimestampType):
        event = F.col(f"r.`{time_field}`")
    else:  # a number of epoch seconds, as Dagger reads one
        event = F.timestamp_micros((F.col(f"r.`{time_field}`") * 1_000_000).cast("long"))
    return parsed.select(*columns, F.coalesce(valid, F.lit(False)).alias(VALIDITY_COLUMN), event.alias(rowtime))


def start(df: DataFrame, config: JobConfig, checkpoint: str, name: str) -> Any:
    """The query: ``to_json`` of every output column into Spark's Kafka sink, Spark's real-time trigger."""
    from pyspark.sql import functions as F

    sink = config.sink_configs[0][1].settings
    writer = (
        df.select(F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns])).alias("value"))
        .writeStream.format("kafka")
        .queryName(name)
        .option("kafka.bootstrap.servers", sink.SINK_KAFKA_BROKERS)
        .option("topic", sink.SINK_KAFKA_TOPIC)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
    for key, value in sink.SINK_KAFKA_PRODUCER_CONFIG.items():
        writer = writer.option(f"kafka.{key}", str(value))
    return writer.trigger(realTime=f"{config.realtime_checkpoint_ms} milliseconds").start()
