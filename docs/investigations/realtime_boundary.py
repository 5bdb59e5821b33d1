"""Spark's real-time mode with nothing of ours in the query: where its latency goes at each checkpoint boundary.

A plain PySpark query (Spark's Kafka source, ``from_json``, the bench's stateless SQL, ``to_json``, Spark's Kafka
sink, ``trigger(realTime=...)``, update mode) is fed at ``--rate`` JSON records/s on Apache Kafka; after
``--warmup`` seconds, ``--seconds`` of input are measured, each record from its produce time to its output's. It
prints p50/p99/max and every second of input whose p99 is above ``--spike`` ms, with that second's distance from
the query's start in checkpoint intervals: the spikes fall where one real-time batch ends and the next begins
(offsets and commits written, the next batch planned and its long-running tasks launched).

    .venv/bin/python docs/investigations/realtime_boundary.py                  # 30-s interval, as the bench then ran (60 s now)
    .venv/bin/python docs/investigations/realtime_boundary.py --interval 10    # three times the boundaries

Only the broker (``testing.broker``: Apache Kafka), the record generator and the bench's latency reading
are ours; the query is Spark's alone.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is docs/investigations/)


def main() -> None:
    import sys

    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    import streaming as bench
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from spark_kafka import json_spark_schema

    from dagger.generate import RecordGenerator, produce_generated
    from dagger.session import jars
    from testing.broker import Broker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=int, default=30, help="checkpoint interval, seconds (default 30)")
    parser.add_argument("--rate", type=float, default=20000, help="records/s fed (default 20000)")
    parser.add_argument("--warmup", type=float, default=20, help="seconds after the first output (default 20)")
    parser.add_argument("--seconds", type=float, default=60, help="seconds of input measured (default 60)")
    parser.add_argument("--spike", type=float, default=100, help="report seconds whose p99 exceeds this (ms)")
    args = parser.parse_args()

    with Broker() as broker:
        source, out = f"rt-in-{time.time_ns()}", f"rt-out-{time.time_ns()}"
        broker.create_topic(source, 2)
        broker.create_topic(out, 1)
        generator = RecordGenerator(
            bench.Bench(broker, "file://" + str(ROOT / "descriptors" / "examples.desc")).booking(),
            seed=2,
            start=bench.START,
            events_per_second=10000,
            data_type="JSON",
        )
        builder = SparkSession.builder.master("local[2]")
        settings = {
            **jars.session_settings(),
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.adaptive.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("OFF")
        schema = json_spark_schema(generator.json_schema())
        records = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
        )
        records.select(F.from_json(F.col("value").cast("string"), schema).alias("r")).select(
            "r.*"
        ).createOrReplaceTempView("data_stream_0")
        result = spark.sql(bench.STATELESS_SQL)
        query = (
            result.select(F.to_json(F.struct(*result.columns)).alias("value"))
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", out)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="rt-boundary-"))
            .outputMode("update")
            .trigger(realTime=f"{args.interval} seconds")
            .start()
        )
        started = time.time()
        stop = threading.Event()
        feed = threading.Thread(
            target=produce_generated,
            args=(generator, broker.bootstrap, source, 0),
            kwargs={"rate": args.rate, "stop": stop.is_set},
        )
        feed.start()
        first = bench.FirstOutput(broker.bootstrap, out)
        while first.look() is None:
            pass
        begin = first.at + args.warmup
        end = begin + args.seconds
        while time.time() < end:
            time.sleep(0.5)
        stop.set()
        feed.join()
        time.sleep(3)
        first.close()
        timed = bench._json_latencies(broker.bootstrap, source, out, begin, end)
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        latencies = [ms for _, ms in timed]
        print(
            f"interval {args.interval} s, {len(latencies):,} records measured: p50 "
            f"{bench._percentile(latencies, 50):.0f} ms, p99 {bench._percentile(latencies, 99):.0f} ms, max "
            f"{max(latencies):.0f} ms"
        )
        by_second: dict[int, list[float]] = {}
        for at, ms in timed:
            by_second.setdefault(int(at), []).append(ms)
        for second, values in sorted(by_second.items()):
            p99 = bench._percentile(values, 99)
            if p99 > args.spike:
                since = second - started
                print(
                    f"  input at {since:6.1f} s after the query started ({since / args.interval:.2f} intervals): "
                    f"p99 {p99:.0f} ms, max {max(values):.0f} ms"
                )


if __name__ == "__main__":
    main()
