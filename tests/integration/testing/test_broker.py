"""The test broker itself (testing/broker.py): what the other tests rely on it to keep."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import testing.broker as broker_module

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000


@pytest.mark.long  # Kafka's first retention check runs 30 s after the broker starts: make test-long
def test_records_with_old_timestamps_outlive_the_brokers_retention_check(monkeypatch):
    # the suite's records carry fixed event times; with Kafka's default retention (168 h) a check deleted those
    # a week old in the middle of a test (make test, run 13 of stop 47: a replay read 0 of 30 records)
    settings = broker_module.Broker.properties
    monkeypatch.setattr(
        broker_module.Broker,
        "properties",
        lambda self, data: {**settings(self, data), "log.retention.check.interval.ms": "1000"},
    )
    with broker_module.Broker() as broker:
        broker.create_topic("old", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        old = int(time.time() * 1000) - 30 * DAY_MS
        for i in range(10):
            producer.produce("old", value=b"x", timestamp=old + i)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "retention"})
        try:
            time.sleep(35)  # past the first check (30 s after start) and a few of the 1 s ones after it
            marks = consumer.get_watermark_offsets(TopicPartition("old", 0), timeout=10, cached=False)
        finally:
            consumer.close()
    assert marks == (0, 10)
