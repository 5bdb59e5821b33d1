"""Produce protobuf records to a topic in a way that is exact on real Kafka and on tansu.

tansu 0.6 answers ListOffsets(latest) with the base offset of a partition's last record batch, so the
records of the last multi-record batch stay invisible to end-offset queries. :func:`produce` therefore
finishes every partition with a single-record batch (its last record, sent alone after a flush), which is
harmless on real Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    partitions: int = 1,
    partitioner: str = "round_robin",
) -> int:
    """Produce ``(key, value)`` pairs; returns the number produced. Records go round-robin over partitions."""
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

    bulk = Producer({"bootstrap.servers": bootstrap, "linger.ms": "20", "batch.num.messages": "10000"})
    for p, items in by_partition.items():
        for key, value in items[:-1]:
            while True:
                try:
                    bulk.produce(topic, value=value, key=key, partition=p, on_delivery=report)
                    break
                except BufferError:
                    bulk.poll(0.1)
    bulk.flush(60)
    single = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0", "batch.num.messages": "1"})
    for p, items in by_partition.items():
        if items:
            key, value = items[-1]
            single.produce(topic, value=value, key=key, partition=p, on_delivery=report)
            single.flush(30)
    if errors:
        raise RuntimeError(f"producing to {topic} failed: {errors[:3]}")
    return len(records)


def consume_all(
    bootstrap: str, topic: str, expected: int | None = None, idle_seconds: float | None = None, timeout: float = 120.0
) -> list:
    """Read every partition of a topic from the beginning until ``expected`` records arrived (plus a short
    grace period that would catch duplicates) or it stays idle. Uses assign, not a consumer group.

    Idle means nothing new for ``idle_seconds`` (default 5 s). With ``expected`` and no ``idle_seconds``, reading
    goes on until they all arrived (then 1.5 s more) or ``timeout``: a job that is still starting, or a broker
    busy with other work, can leave a topic quiet for many seconds before the records come.

    tansu 0.6 can leave records its producers had acknowledged invisible to fetches: when two producers append to
    one partition at once, its high watermark may stop at the end of the first one's batch until another batch
    arrives (seen in the full suite: a sink counted 51 delivered records, the topic showed 26). So while fewer than
    ``expected`` arrived and the topic stays quiet for 3 s, one sentinel record (header ``dagger-test-sentinel``)
    is appended to each partition, once; sentinels are never returned. Real Kafka needs none of this."""
    if idle_seconds is None:
        idle_seconds = timeout if expected is not None else 5.0
    import time
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": "50",
        }
    )
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.partitions])
    out = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    nudged = False
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(out) >= expected:
                idle_seconds = min(idle_seconds, 1.5)
            batch = consumer.consume(1000, timeout=0.2)
            got = [m for m in batch if m.error() is None]
            out.extend(m for m in got if not _is_sentinel(m))
            if got:
                last = time.monotonic()
            elif time.monotonic() - last > idle_seconds:
                break
            elif expected is not None and len(out) < expected and not nudged and time.monotonic() - last > 3:
                _append_sentinels(bootstrap, topic, list(metadata.partitions))
                nudged = True
    finally:
        consumer.close()
    return out


SENTINEL_HEADER = "dagger-test-sentinel"


def _is_sentinel(message: Any) -> bool:
    return any(key == SENTINEL_HEADER for key, _ in (message.headers() or []))


def _append_sentinels(bootstrap: str, topic: str, partitions: list[int]) -> None:
    """One single-record batch per partition: moves tansu's high watermark past every acknowledged record."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": "1", "linger.ms": "0"})
    for partition in partitions:
        producer.produce(topic, value=b"", partition=partition, headers=[(SENTINEL_HEADER, b"1")])
        producer.flush(10)


def produce_at(bootstrap: str, topic: str, records: list[tuple[int, bytes]], partitions: int = 1) -> None:
    """Produce ``(timestamp_ms, value)`` records (Kafka timestamps set) round-robin over partitions, one record
    per batch (tansu reports the end offset of a partition as the base offset of its last batch)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0", "batch.num.messages": "1"})
    for i, (stamp, value) in enumerate(records):
        producer.produce(topic, value=value, partition=i % partitions, timestamp=stamp)
        producer.poll(0)
    assert producer.flush(60) == 0
