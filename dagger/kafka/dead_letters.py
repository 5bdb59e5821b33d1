"""Where a job's dead letters go, from its keys: the job's output (``DEAD_LETTER_KAFKA_TOPIC`` on
``DEAD_LETTER_KAFKA_BROKERS``, or ``DEAD_LETTER_PATH``) and a stream's own topic (``SOURCE_KAFKA_DEAD_LETTER_TOPIC``,
on the stream's cluster with its security settings), each Kafka producer's settings from
:func:`~dagger.kafka.client.client_config`. The writers are :mod:`dagger.dead_letter`'s. Runs on the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagger.dead_letter import DeadLetterSpec
from dagger.kafka.client import client_config

if TYPE_CHECKING:
    from dagger.config.model import JobConfig, StreamConfig


def job_dead_letters(config: JobConfig) -> DeadLetterSpec | None:
    """The job's dead-letter output, or None when the job has none."""
    if config.DEAD_LETTER_KAFKA_TOPIC:
        producer = client_config(config, "dead_letters")
        return DeadLetterSpec(config.job_slug, kafka_topic=config.DEAD_LETTER_KAFKA_TOPIC, producer_config=producer)
    if config.DEAD_LETTER_PATH:
        return DeadLetterSpec(config.job_slug, path=config.DEAD_LETTER_PATH)
    return None


def stream_dead_letters(stream: StreamConfig, config: JobConfig) -> DeadLetterSpec | None:
    """The stream's own dead-letter topic (on its own cluster, with its security settings), else the job's."""
    topic = stream.settings.SOURCE_KAFKA_DEAD_LETTER_TOPIC
    if topic:
        producer = client_config(stream.settings, "stream_dead_letters", table=stream.INPUT_SCHEMA_TABLE)
        return DeadLetterSpec(config.job_slug, kafka_topic=topic, producer_config=producer)
    return job_dead_letters(config)
