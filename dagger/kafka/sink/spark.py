"""Spark's Kafka sink for a job's one Kafka sink (real-time mode, and micro-batches on Spark's connector:
``SPARK_KAFKA_CONNECTOR``): each output row encoded in the JVM, the producer's settings translated from
librdkafka's names (:func:`dagger.kafka.client.client_config`). Runs on the driver (planning)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.kafka.client import client_config
from dagger.kafka.java_client import fit_delivery_timeout, java_producer_settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.config.model import JobConfig


def start_query(
    sink: Any,
    df: DataFrame,
    config: JobConfig,
    checkpoint: str,
    name: str,
    trigger: dict[str, Any] | None = None,
    async_progress: bool = False,
    output_mode: str = "append",
) -> Any:
    """The query: every output row encoded in the JVM (protobuf by Dagger's encoder, JSON by ``to_json``, behind
    Confluent's header where the sink writes that format) into Spark's Kafka sink. ``trigger``: Spark's trigger
    arguments for micro-batches (``processingTime`` or ``availableNow``); None: real-time mode's, with the job's
    checkpoint interval. A row the encoder refuses stops the query naming its column: such a query has no
    dead-letter output.

    ``async_progress`` (a stateless query on a processing-time trigger): Spark writes each micro-batch's offset
    and commit log entries beside the next micro-batch instead of before and after it (its asynchronous progress
    tracking; 9 ms less per batch and p99 latency 321 → 147 ms in ``make bench``'s ``latency_spark_jvm``). Every
    batch is still logged (``asyncProgressTrackingCheckpointIntervalMs`` 0), so the checkpoint stays one an
    ``--available-now`` run (where Spark refuses the option) restarts from; after a crash the batches not yet
    logged are read again: the sink writes at least once, as without it."""

    settings = config.sink_configs[0][1].settings
    real_time = trigger is None
    columns = {"value": _encoded(df, sink.value, sink.display_name, real_time)}
    if sink.key is not None:
        columns["key"] = _encoded(df, sink.key, sink.display_name, real_time)
    writer = (
        df.select(*[column.alias(part) for part, column in columns.items()])
        .writeStream.format("kafka")
        .queryName(name)
        .option("kafka.bootstrap.servers", settings.SINK_KAFKA_BROKERS)
        .option("topic", settings.SINK_KAFKA_TOPIC)
        .option("checkpointLocation", checkpoint)
        .outputMode("update" if real_time else output_mode)
    )
    producer = client_config(settings, "spark_producer", known=java_producer_settings(df.sparkSession))
    if not real_time and not _linger_set(settings):
        # micro-batches: the Java client's own default since Kafka 4.0 (KIP-1030) rather than Dagger's 0, which left
        # it sending small batches: 5 ms a batch of latency, and (with the JVM reader's fetches) 1.28x the throughput
        producer["linger.ms"] = "5"
    producer = fit_delivery_timeout(producer, "SINK_KAFKA_PRODUCER_CONFIG")
    for key, value in producer.items():
        writer = writer.option(f"kafka.{key}", value)
    if real_time:
        return writer.trigger(realTime=f"{config.realtime_checkpoint_ms} milliseconds").start()
    if async_progress:
        writer = writer.option("asyncProgressTrackingEnabled", "true")
        writer = writer.option("asyncProgressTrackingCheckpointIntervalMs", "0")
    return writer.trigger(**trigger).start()


def _linger_set(settings: Any) -> bool:
    """Whether the sink's settings say how long the producer lingers (``SINK_KAFKA_LINGER_MS``, or its librdkafka
    names in ``SINK_KAFKA_PRODUCER_CONFIG``)."""
    given = settings.SINK_KAFKA_PRODUCER_CONFIG
    return "SINK_KAFKA_LINGER_MS" in settings.model_fields_set or any(
        k in given for k in ("linger.ms", "queue.buffering.max.ms")
    )


def _encoded(df: DataFrame, part: Any, sink_name: str, real_time: bool) -> Any:
    """One part (value or key) of the records, encoded in the JVM by its format."""
    return part.format.spark_part(part, df, sink_name, real_time)
