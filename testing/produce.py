"""Produce records to a topic and read a topic back whole, for tests, the quickstart and the bench."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    partitions: int = 1,
    partitioner: str = "round_robin",
    config: dict[str, str] | None = None,
) -> int:
    """Produce ``(key, value)`` pairs; returns the number produced. Records go round-robin over partitions.
    ``config``: more client settings (security)."""
    from confluent_kafka import Producer

    records = list(records)
    if not records:
        return 0
    by_partition: dict[int, list[tuple[bytes | None, bytes | None]]] = {p: [] for p in range(partitions)}
    for i, record in enumerate(records):
        by_partition[i % partitions].append(record)
    errors: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": "20", "batch.num.messages": "10000", **(config or {})}
    )
    for p, items in by_partition.items():
        for key, value in items:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=p, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
    left = producer.flush(60)
    if left:
        errors.append(f"{left} records still unacknowledged after 60 s")
    if errors:
        raise RuntimeError(f"producing to {topic} failed: {errors[:3]}")
    return len(records)


def consume_all(
    bootstrap: str,
    topic: str,
    expected: int | None = None,
    idle_seconds: float | None = None,
    timeout: float = 120.0,
    config: dict[str, str] | None = None,
) -> list:
    """Read every partition of a topic from offset 0 until ``expected`` records arrived (plus a short grace
    period that would catch duplicates) or it stays idle; the records in partition and offset order. Uses
    assign, not a consumer group, and suits topics without compaction or transactions (the tests' topics).

    Idle means nothing new for ``idle_seconds`` (default 5 s). With ``expected`` and no ``idle_seconds``, reading
    goes on until they all arrived (then 1.5 s more) or ``timeout``: a job that is still starting, or a broker
    busy with other work, can leave a topic quiet for many seconds before the records come."""
    if idle_seconds is None:
        idle_seconds = timeout if expected is not None else 5.0
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": "50",
            **(config or {}),
        }
    )
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
    got: dict[tuple[int, int], Any] = {}
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(got) >= expected:
                idle_seconds = min(idle_seconds, 1.5)
            batch = [m for m in consumer.consume(1000, timeout=0.2) if m.error() is None]
            for m in batch:
                got[(m.partition(), m.offset())] = m
            if batch:
                last = time.monotonic()
            elif time.monotonic() - last > idle_seconds:
                break
    finally:
        consumer.close()
    return [got[k] for k in sorted(got)]


def topic_size(bootstrap: str, topic: str) -> int:
    """How many records a topic without compaction or transactions holds: the sum of its partitions' high
    watermarks. Exact once nothing produces to it any more."""
    from confluent_kafka import Consumer, TopicPartition

    lister = Consumer({"bootstrap.servers": bootstrap, "group.id": "dagger-topic-size"})
    try:
        partitions = lister.list_topics(topic, timeout=10).topics[topic].partitions
        total = 0
        for p in partitions:
            low, high = lister.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            total += max(high, 0) - max(low, 0)
    finally:
        lister.close()
    return total


def produce_at(bootstrap: str, topic: str, records: list[tuple[int, bytes]], partitions: int = 1) -> None:
    """Produce ``(timestamp_ms, value)`` records (Kafka timestamps set) round-robin over partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"})
    for i, (stamp, value) in enumerate(records):
        producer.produce(topic, value=value, partition=i % partitions, timestamp=stamp)
        producer.poll(0)
    assert producer.flush(60) == 0
