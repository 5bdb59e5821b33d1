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

    extra = config or {}
    bulk = Producer({"bootstrap.servers": bootstrap, "linger.ms": "20", "batch.num.messages": "10000", **extra})
    for p, items in by_partition.items():
        for key, value in items[:-1]:
            while True:
                try:
                    bulk.produce(topic, value=value, key=key, partition=p, on_delivery=report)
                    break
                except BufferError:
                    bulk.poll(0.1)
    bulk.flush(60)
    single = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0", "batch.num.messages": "1", **extra})
    for p, items in by_partition.items():
        if items:
            key, value = items[-1]
            single.produce(topic, value=value, key=key, partition=p, on_delivery=report)
            single.flush(30)
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
    busy with other work, can leave a topic quiet for many seconds before the records come.

    Offsets are read one by one: where they jump, the reader goes back to the first missing offset and reads
    again. The embedded broker (tansu 0.6) can hand a reader a batch past one it has acknowledged but not yet
    stored when producers append to one partition at once, so that a reader that trusted the jump would never
    see that batch (``docs/brokers.md``, ``scripts/tansu_visibility.py``). A gap still there after 100 re-reads
    (about 20 s) is passed, and the count comes out short. On real Kafka such topics have no gaps."""
    if idle_seconds is None:
        idle_seconds = timeout if expected is not None else 5.0
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    from dagger.sources.kafka_embedded import READ_FETCH_WAIT_MS

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": READ_FETCH_WAIT_MS,
            **(config or {}),
        }
    )
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
    got: dict[tuple[int, int], Any] = {}
    following = dict.fromkeys(metadata.partitions, 0)  # the next offset expected in each partition
    rewinds: dict[tuple[int, int], int] = {}
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(got) >= expected:
                idle_seconds = min(idle_seconds, 1.5)
            batch = [m for m in consumer.consume(1000, timeout=0.2) if m.error() is None]
            rewound: set[int] = set()
            for m in batch:
                p, offset = m.partition(), m.offset()
                if p in rewound:
                    continue
                gap = (p, following[p])
                if offset > following[p] and rewinds.get(gap, 0) < 100:  # a jump: read again from the gap
                    rewinds[gap] = rewinds.get(gap, 0) + 1
                    consumer.seek(TopicPartition(topic, p, following[p]))
                    rewound.add(p)
                    continue
                got[(p, offset)] = m
                following[p] = max(following[p], offset + 1)
            if batch:
                last = time.monotonic()
            elif time.monotonic() - last > idle_seconds:
                break
    finally:
        consumer.close()
    return [got[k] for k in sorted(got)]


def topic_size(bootstrap: str, topic: str) -> int:
    """How many records a topic without compaction or transactions holds: the sum of its partitions' high
    watermarks, as fetch responses give them (on the embedded broker ListOffsets(latest) can be short; see
    :mod:`dagger.sources.kafka_embedded`). Exact once nothing produces to it any more."""
    from confluent_kafka import Consumer, TopicPartition

    from dagger.sources.kafka_embedded import HighWatermarkProbe

    config = {"bootstrap.servers": bootstrap, "group.id": "dagger-topic-size"}
    lister = Consumer(config)
    try:
        partitions = lister.list_topics(topic, timeout=10).topics[topic].partitions
        marks = {}
        for p in partitions:
            low, high = lister.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            marks[str(p)] = (topic, p, max(low, 0), max(high, 0))
    finally:
        lister.close()
    # a fetch with a short wait gets nothing from a loaded embedded broker (docs/brokers.md, defect 4): wait long
    probe = HighWatermarkProbe(config, fetch_wait_ms="500")
    try:
        highs = probe.highs(marks, timeout_s=30)
        if probe.unanswered:  # never a silent guess: the listed end can be short by the last batch
            raise RuntimeError(
                f"topic_size({topic!r}): partitions {', '.join(probe.unanswered)} answered no fetch in 30 s; "
                "their size is unknown"
            )
    finally:
        probe.close()
    return sum(highs.get(k, listed) for k, (_t, _p, _low, listed) in marks.items())


def produce_at(bootstrap: str, topic: str, records: list[tuple[int, bytes]], partitions: int = 1) -> None:
    """Produce ``(timestamp_ms, value)`` records (Kafka timestamps set) round-robin over partitions, one record
    per batch (tansu reports the end offset of a partition as the base offset of its last batch)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0", "batch.num.messages": "1"})
    for i, (stamp, value) in enumerate(records):
        producer.produce(topic, value=value, partition=i % partitions, timestamp=stamp)
        producer.poll(0)
    assert producer.flush(60) == 0
