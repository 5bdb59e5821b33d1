"""Where a micro-batch's planning time goes: the Kafka source's driver-side calls, timed one by one.

Starts a broker (Apache Kafka, ``testing.broker``), feeds a topic of ``--partitions`` (2) partitions at
``--rate`` records/s (event time stamped at send), and every ``--every`` seconds plans as the source does for a
micro-batch (``latestOffset``), timing each of its round trips: the topic listing, the offsets (ListOffsets) and
the event-time alignment; prints the median and p90 of each in milliseconds.

    .venv/bin/python docs/investigations/planning_cost.py --rate 20000 --seconds 20
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is docs/investigations/)
sys.path.insert(0, str(ROOT))


def main() -> None:
    from pyspark.sql.datasource import ReadAllAvailable

    from dagger.generate import RecordGenerator, produce_generated
    from dagger.kafka.source.reader import KafkaStreamReader
    from dagger.kafka.source.spec import KafkaSourceSpec
    from dagger.schema.descriptor_sets import DescriptorSet
    from testing.broker import Broker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--every", type=float, default=0.2)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()
    desc = (ROOT / "descriptors" / "examples.desc").read_bytes()
    booking = DescriptorSet([("x", desc)]).find_message("dagger.examples.BookingLogMessage")
    with Broker() as broker:
        topic = "planning"
        broker.create_topic(topic, args.partitions)
        stop = threading.Event()
        generator = RecordGenerator(booking, seed=1, events_per_second=args.rate)
        feeder = threading.Thread(
            target=produce_generated,
            args=(generator, broker.bootstrap, topic, 0),
            kwargs={"rate": args.rate, "stop": stop.is_set, "partitions": args.partitions},
        )
        feeder.start()
        time.sleep(2)
        spec = KafkaSourceSpec(
            table="t",
            topic_pattern=topic,
            client_config={
                "bootstrap.servers": broker.bootstrap,
                "group.id": "planning",
                "auto.offset.reset": "latest",
            },
            descriptor_set_b64=base64.b64encode(desc).decode(),
            message_name="dagger.examples.BookingLogMessage",
            rowtime_field_number=5,
            read_batch_size=50_000,
            aligned_delay_ms=10_000,
        )
        reader = KafkaStreamReader(spec)
        timings: dict[str, list[float]] = {}

        def timed(name: str, call):  # noqa: ANN001, ANN202
            began = time.perf_counter()
            out = call()
            timings.setdefault(name, []).append((time.perf_counter() - began) * 1000)
            return out

        from dagger.kafka.source import event_time

        original_times = event_time.EventTimeProbe.times

        def probe_times(probe, wanted):  # noqa: ANN001, ANN202
            return timed("event-time probe (one round)", lambda: original_times(probe, wanted))

        event_time.EventTimeProbe.times = probe_times
        original_topics, original_marks = reader._topic_partitions, reader._watermarks
        reader._topic_partitions = lambda: timed("list topics", original_topics)
        reader._watermarks = lambda tps: timed("offsets", lambda: original_marks(tps))
        try:
            start = reader.initialOffset()
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                end = timed("latestOffset (all)", lambda s=start: reader.latestOffset(s, ReadAllAvailable()))
                start = end
                time.sleep(args.every)
        finally:
            reader.stop()
            stop.set()
            feeder.join()
    for name, values in timings.items():
        values.sort()
        p90 = values[int(len(values) * 0.9)]
        print(f"{name:34s} median {statistics.median(values):7.1f} ms   p90 {p90:7.1f} ms   ({len(values)} calls)")


if __name__ == "__main__":
    main()
