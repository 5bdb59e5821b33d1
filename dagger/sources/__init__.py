"""Sources, registered by the ``SOURCE_NAME`` users write in a stream's ``SOURCE_DETAILS``.

A source builder takes ``(spark, stream, job_config, descriptors, options)`` and returns a streaming
DataFrame with the table's columns (message fields, ``__internal_validation_field__``, rowtime).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from dagger.errors import DaggerConfigError


@dataclass
class SourceOptions:
    """Run-wide source settings that are not part of a stream's own config."""

    commit_offsets: bool = True
    bounded: bool = False  # every stream has an end: the job runs as one batch query
    from_ms: int | None = None  # dagger run --from: every Kafka stream starts here
    to_ms: int | None = None  # dagger run --to: every Kafka stream stops here (exclusive)
    fields: dict[str, list[str]] | None = None  # table -> the message fields to decode (absent: all)
    event_time: bool = True  # the job's results depend on the watermark: read Kafka partitions aligned in event time


def kafka_stream(spark: Any, stream: Any, config: Any, descriptors: Any, options: SourceOptions) -> Any:
    """A KAFKA_SOURCE / KAFKA_CONSUMER stream read by the ``dagger-kafka`` Python data source."""
    from dagger.sources.kafka import SOURCE_FORMAT, KafkaSourceSpec, client_config
    from dagger.sources.kafka_positions import end_position, start_position

    descriptors.find_message(stream.INPUT_SCHEMA_PROTO_CLASS)
    conf = client_config(stream, config.job_slug, config.SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE)
    dead_letter = None
    if stream.SOURCE_KAFKA_INVALID_RECORD_POLICY == "dead-letter":
        dead_letter = stream_dead_letter(stream, conf, config)
    spec = KafkaSourceSpec(
        table=stream.INPUT_SCHEMA_TABLE,
        topic_pattern=stream.SOURCE_KAFKA_TOPIC_NAMES,
        client_config=conf,
        descriptor_set_b64=base64.b64encode(descriptors.serialized).decode(),
        message_name=stream.INPUT_SCHEMA_PROTO_CLASS,
        rowtime_field_number=stream.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX,
        rowtime=config.FLINK_ROWTIME_ATTRIBUTE_NAME,
        invalid_policy=stream.SOURCE_KAFKA_INVALID_RECORD_POLICY,
        dead_letter=asdict(dead_letter) if dead_letter else None,
        max_records_per_trigger=config.SPARK_MAX_RECORDS_PER_TRIGGER,
        read_batch_size=config.SPARK_KAFKA_READ_BATCH_SIZE,
        aligned_delay_ms=(
            config.FLINK_WATERMARK_DELAY_MS if config.SPARK_EVENT_TIME_ALIGNMENT and options.event_time else None
        ),
        idle_timeout_ms=config.SPARK_PARTITION_IDLE_TIMEOUT_MS,
        commit_offsets=options.commit_offsets and not options.bounded,
        fields=(options.fields or {}).get(stream.INPUT_SCHEMA_TABLE),
    )
    start, end = start_position(stream, options.from_ms), end_position(stream, options.to_ms)
    spec.start = asdict(start)
    spec.end = asdict(end) if end is not None else None
    low = start.timestamp_ms if start.kind == "timestamp" else None
    high = end.timestamp_ms if end is not None and end.kind == "timestamp" else None
    if low is not None and high is not None:
        spec.time_range = [low, high]
    if options.bounded:
        if end is None:
            raise DaggerConfigError(f"stream '{stream.INPUT_SCHEMA_TABLE}' has no end position in a bounded run")
        return spark.read.format(SOURCE_FORMAT).option("spec", spec.to_option()).load()
    return spark.readStream.format(SOURCE_FORMAT).option("spec", spec.to_option()).load()


def stream_dead_letter(stream: Any, consumer_config: dict[str, str], config: Any) -> Any:
    """The stream's own dead-letter topic (on its own cluster, with its security settings), else the job's."""
    from dagger.dead_letter import DeadLetterSpec

    if stream.SOURCE_KAFKA_DEAD_LETTER_TOPIC:
        producer = {k: v for k, v in consumer_config.items() if k.startswith(("security.", "sasl.", "ssl."))}
        producer["bootstrap.servers"] = stream.SOURCE_KAFKA_DEAD_LETTER_BROKERS or consumer_config["bootstrap.servers"]
        return DeadLetterSpec(
            config.job_slug, kafka_topic=stream.SOURCE_KAFKA_DEAD_LETTER_TOPIC, producer_config=producer
        )
    return DeadLetterSpec.from_config(config)


def parquet_stream(spark: Any, stream: Any, config: Any, descriptors: Any, options: SourceOptions) -> Any:
    """A PARQUET_SOURCE stream: files read by Spark's Parquet reader (:mod:`dagger.sources.parquet`)."""
    from dagger.sources.parquet import parquet_stream as build

    return build(spark, stream, config, descriptors, options)


#: SOURCE_NAME → builder. Both Kafka names map to the same Spark source.
SOURCES: dict[str, Callable[..., Any]] = {
    "KAFKA_SOURCE": kafka_stream,
    "KAFKA_CONSUMER": kafka_stream,
}
SOURCES["PARQUET_SOURCE"] = parquet_stream


def register_data_sources(spark: Any) -> None:
    """Register the Python data sources (Kafka reader, fan-out sink writer) with a Spark session."""
    from dagger.sinks.spark_writer import SinkDataSource
    from dagger.sources.kafka import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(SinkDataSource)
