"""The test readers' handling of tansu's invisible-records quirk: sentinels nudge the watermark, never returned."""

from __future__ import annotations

import time

from dagger.devtools.produce import SENTINEL_HEADER, consume_all, produce


def test_a_short_read_appends_one_sentinel_per_partition_and_never_returns_it(broker, topic):
    name = topic("nudge", partitions=2)
    produce(broker.bootstrap, name, [(None, f"r{i}".encode()) for i in range(10)], partitions=2)
    started = time.monotonic()
    rows = consume_all(broker.bootstrap, name, expected=11, timeout=8)  # one more than there is
    assert sorted(m.value() for m in rows) == sorted(f"r{i}".encode() for i in range(10))
    assert time.monotonic() - started >= 3  # it waited for the quiet period first
    from confluent_kafka import Consumer, TopicPartition

    raw = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "raw", "enable.auto.commit": "false"})
    raw.assign([TopicPartition(name, p, 0) for p in (0, 1)])
    seen, deadline = [], time.monotonic() + 20
    while len(seen) < 12 and time.monotonic() < deadline:
        seen += [m for m in raw.consume(100, timeout=0.5) if m.error() is None]
    raw.close()
    sentinels = [m for m in seen if any(k == SENTINEL_HEADER for k, _ in (m.headers() or []))]
    assert sorted(m.partition() for m in sentinels) == [0, 1]  # one per partition, appended once
    assert len(consume_all(broker.bootstrap, name, expected=10)) == 10  # a later read skips them too
