"""Produce protobuf records to a topic in a way that is exact on real Kafka and on tansu.

tansu 0.6 answers ListOffsets(latest) with the base offset of a partition's last record batch, so the
records of the last multi-record batch stay invisible to end-offset queries. :func:`produce` therefore
finishes every partition with a single-record batch (its last record, sent alone after a flush), which is
harmless on real Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable


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


def consume_all(bootstrap: str, topic: str, expected: int | None = None, idle_seconds: float = 5.0, timeout: float = 120.0) -> list:
    """Read a topic from the beginning until ``expected`` records arrived or it stays idle."""
    import time
    import uuid

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
    )
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(out) >= expected:
                # keep reading briefly to catch duplicates beyond the expected count
                idle_seconds = min(idle_seconds, 2.0)
            batch = consumer.consume(1000, timeout=0.5)
            got = [m for m in batch if m.error() is None]
            out.extend(got)
            if got:
                last = time.monotonic()
            elif time.monotonic() - last > idle_seconds:
                break
    finally:
        consumer.close()
    return out
