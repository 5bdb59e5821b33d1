"""The job's dead-letter destination as its keys describe it (writing to Kafka is tested against a broker in
tests/unit/serde/test_json_input.py and tests/integration)."""

from __future__ import annotations

import json

from dagger.job import load_config
from dagger.kafka.dead_letters import job_dead_letters
from tests.unit.config.test_config import BASE


def test_the_dead_letter_producer_takes_the_extra_librdkafka_properties_of_dead_letter_kafka_producer_config():
    config = load_config(
        data={
            **BASE,
            "DEAD_LETTER_KAFKA_TOPIC": "rejects",
            "DEAD_LETTER_KAFKA_BROKERS": "dead-letters:9092",
            "DEAD_LETTER_KAFKA_PRODUCER_CONFIG": json.dumps({"acks": "all", "compression.type": "zstd"}),
        }
    )
    spec = job_dead_letters(config)
    assert spec.kafka_topic == "rejects"
    assert spec.producer_config == {
        "bootstrap.servers": "dead-letters:9092",
        "acks": "all",
        "compression.type": "zstd",
    }
