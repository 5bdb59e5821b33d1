"""Spark's Kafka source for a job's streams (real-time mode): its options from a stream's keys, each stream decoded
in the JVM into its table by its format (protobuf by Dagger's decoder, JSON by ``from_json``), and the query's progress in our
reader's form. Runs on the driver (planning); the query then runs in the JVM alone."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from dagger.kafka.client import client_config
from dagger.kafka.source.driver import driver_reader
from dagger.kafka.source.positions import start_position
from dagger.kafka.source.spec import STREAM_KEY
from dagger.plugins.format import TableRead, format_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig


def kafka_options(
    stream: StreamConfig, config: JobConfig, resolve: bool = True, micro_batches: bool = False
) -> dict[str, str]:
    """Spark's Kafka source options from a stream's keys: Dagger's ``SOURCE_KAFKA_CONSUMER_CONFIG_*`` are Kafka's
    Java client settings, which Spark's source takes as ``kafka.<setting>``. Spark uses the start only when the
    checkpoint has no offsets yet (a first run); ``resolve=False`` (``dagger validate``) leaves the group's offsets
    unasked. ``micro_batches``: Spark's connector outside real-time mode, where ``SPARK_MAX_RECORDS_PER_TRIGGER``
    bounds a micro-batch as it bounds our reader's (real-time mode refuses a bound)."""

    s = stream.settings
    options = {f"kafka.{name}": value for name, value in client_config(s, "spark_consumer").items()}
    options.update(
        {
            # anchored: Spark's source matches a pattern anywhere in a topic's name, Dagger (as Kafka's own consumer
            # and our reader) matches whole names
            "subscribePattern": anchored(s.SOURCE_KAFKA_TOPIC_NAMES),
            "includeHeaders": "false",
        }
    )
    if micro_batches and config.SPARK_MAX_RECORDS_PER_TRIGGER is not None:
        options["maxOffsetsPerTrigger"] = str(config.SPARK_MAX_RECORDS_PER_TRIGGER)
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


def kafka_stream(
    spark: SparkSession,
    stream: StreamConfig,
    config: JobConfig,
    descriptors: Any,
    resolve: bool = True,
    fields: list[str] | None = None,
    micro_batches: bool = False,
) -> DataFrame:
    """A stream read by Spark's Kafka source, decoded in the JVM into its table by its format
    (:meth:`~dagger.plugins.format.Format.spark_kafka_table`); ``micro_batches``: outside real-time mode
    (:func:`kafka_options`)."""
    reader = spark.readStream.format("kafka")
    for name, value in kafka_options(stream, config, resolve, micro_batches).items():
        reader = reader.option(name, value)
    raw = reader.load().select("value", "topic", "partition", "offset")
    policy = stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY
    where = TableRead(stream.INPUT_SCHEMA_TABLE, policy, config.FLINK_ROWTIME_ATTRIBUTE_NAME, fields)
    return format_of(stream).spark_kafka_table(raw, stream, descriptors, where)
