"""The Kafka source's driver side outside a query: a stream's consumer settings and a reader on its brokers for
listing topics, resolving offsets and committing them (``dagger validate``, Spark's connector's first offsets, the
runner's last commits). Runs on the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.kafka.client import client_config
from dagger.kafka.source.spec import KafkaSourceSpec

if TYPE_CHECKING:
    from dagger.config.model import JobConfig, StreamConfig


def consumer_config(stream: StreamConfig, config: JobConfig) -> dict[str, str]:
    """The librdkafka consumer settings of ``stream`` (:func:`dagger.kafka.client.client_config`)."""
    return client_config(
        stream.settings,
        "consumer",
        table=stream.INPUT_SCHEMA_TABLE,
        job_slug=config.job_slug,
        large_messages=config.SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE,
    )


def driver_reader(stream: StreamConfig, config: JobConfig) -> Any:
    """Our Kafka reader's driver side for ``stream`` (listing, offsets, commits), with the stream's client
    settings and group."""
    from dagger.kafka.source.reader import KafkaStreamReader  # pyspark's data source API: loaded when a job runs

    conf = consumer_config(stream, config)
    spec = KafkaSourceSpec(
        table=stream.INPUT_SCHEMA_TABLE,
        topic_pattern=stream.settings.SOURCE_KAFKA_TOPIC_NAMES,
        client_config=conf,
        unreachable_timeout_ms=stream.settings.SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS,
        first_contact_ms=config.SPARK_FIRST_CONTACT_TIMEOUT_MS,
    )
    return KafkaStreamReader(spec)
