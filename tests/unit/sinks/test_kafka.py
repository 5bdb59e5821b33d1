"""The Kafka sink its keys build: the librdkafka producer settings, with no broker (producing to one is
tests/integration)."""

from __future__ import annotations

from dagger.job import load_config
from dagger.sinks import build_sinks
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE

KAFKA = {
    "SINK_TYPE": "kafka",
    "SINK_KAFKA_BROKERS": "out:9092",
    "SINK_KAFKA_TOPIC": "summaries",
    "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
}


def test_sink_kafka_linger_ms_is_the_producers_linger_ms():
    (sink,) = build_sinks(load_config(data={**BASE, **KAFKA, "SINK_KAFKA_LINGER_MS": "25"}), example_descriptors())
    assert sink.producer_config["linger.ms"] == "25"
    assert sink.producer_config["bootstrap.servers"] == "out:9092"
