"""Function-library benchmark (``make bench-udfs``).

1. Rows/s of every scalar function over 1M rows (Spark ``noop`` sink, whole-stage evaluation, local[2]), next to
   an equivalent built-in expression where Spark has one.
2. A streaming job over the embedded broker with and without ``Distance`` + ``GeoHash``: the job with them must
   keep at least 70% of the throughput of the job without them.

Writes ``bench/results/udfs.json`` and ``bench/results/udfs.md``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

ROWS = int(os.environ.get("BENCH_UDF_ROWS", "1000000"))
JOB_ROWS = int(os.environ.get("BENCH_UDF_JOB_ROWS", "300000"))

# function call, built-in equivalent (or None)
CASES = {
    "Distance": ("Distance(lat, lon, lat2, lon2)", None),
    "GeoHash": ("GeoHash(lat, lon, 6)", None),
    "S2Id": ("S2Id(lat, lon, 13)", None),
    "S2AreaInKm2": ("S2AreaInKm2(cell)", None),
    "StartOfWeek": ("StartOfWeek(millis, 'Asia/Jakarta')", "unix_millis(date_trunc('WEEK', timestamp_millis(millis)))"),
    "EndOfWeek": ("EndOfWeek(millis, 'Asia/Jakarta')", None),
    "StartOfMonth": (
        "StartOfMonth(seconds, 'Asia/Jakarta')",
        "unix_seconds(date_trunc('MONTH', timestamp_seconds(seconds)))",
    ),
    "EndOfMonth": ("EndOfMonth(seconds, 'Asia/Jakarta')", None),
    "TimeInDate": ("TimeInDate(seconds, 10, 30, 'Asia/Jakarta')", None),
    "TimestampFromUnix": ("TimestampFromUnix(seconds)", "timestamp_seconds(seconds)"),
    "FormatTimeInZone": (
        "FormatTimeInZone(ts, 'Asia/Jakarta', 'yyyy-MM-dd HH:mm')",
        "date_format(ts, 'yyyy-MM-dd HH:mm')",
    ),
    "JsonQuery": ("JsonQuery(doc, '$.a.b')", "get_json_object(doc, '$.a.b')"),
    "JsonUpdate": ("JsonUpdate(doc, '$.a.b', 1)", None),
    "JsonDelete": ("JsonDelete(doc, '$.a')", None),
    "Split": ("Split(csv, ',')", "split(csv, ',')"),
    "ElementAt": ("ElementAt(arr, 1)", "element_at(arr, 2)"),
    "MapGet": ("MapGet(m, 'k1')", "m['k1']"),
    "ListContains": ("ListContains(tags, 'b')", "array_contains(tags, 'b')"),
    "ArrayAggregate": (
        "ArrayAggregate(arr, 'distinct.sum', 'Integer')",
        "aggregate(array_distinct(arr), 0, (a, x) -> a + x)",
    ),
    "ArrayOperate": ("ArrayOperate(arr, 'distinct.sorted', 'Integer')", "array_sort(array_distinct(arr))"),
    "ByteToString": ("ByteToString(raw)", "CAST(raw AS STRING)"),
    "SingleFeatureWithType": ("SingleFeatureWithType('f', seconds, 'LongType')", None),
    "ExponentialMovingAverage": ("ExponentialMovingAverage(tss, vals, ts, 3.0D, 0.5D)", None),
    "LinearTrend": ("LinearTrend(tss, vals, ts, 3)", None),
}

SETUP = f"""
SELECT -6.2 + (id % 1000) * 0.001 AS lat, 106.8 + (id % 997) * 0.001 AS lon, -6.9 AS lat2, 107.6 AS lon2,
       1562224758000 + id * 1000 AS millis, 1562224758 + id AS seconds, timestamp_seconds(1562224758 + id) AS ts,
       '3344475485613588480' AS cell, concat('{{"a":{{"b":', id % 100, '}}}}') AS doc,
       concat('a,b,,', id % 10, ',,') AS csv, array(1, 2, 3, CAST(id % 5 AS INT)) AS arr,
       map('k1', id, 'k2', 2) AS m, array('a', 'b') AS tags, CAST('héllo' AS BINARY) AS raw,
       array(timestamp_seconds(1562224758 + id), timestamp_seconds(1562224818 + id)) AS tss,
       array(1.0D, 2.0D) AS vals
FROM range({ROWS})
"""


def _session():
    from pyspark.sql import SparkSession

    from dagger.session.spark import DEFAULT_CONF, use_worker_python

    use_worker_python()
    builder = SparkSession.builder.master("local[2]").appName("bench-udfs")
    for k, v in {**DEFAULT_CONF, "spark.ui.enabled": "false"}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _rate(spark, expression: str) -> float:
    df = spark.sql(f"SELECT {expression} AS out FROM bench_input")
    df.write.format("noop").mode("overwrite").save()  # warm-up (Python workers, codegen)
    best = None
    for _ in range(2):
        started = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return ROWS / best


def scalar_rates(spark) -> list[dict]:
    from dagger.functions import build_catalog, register
    from dagger.sql.rewrite import rewrite_sql
    from udfs.declare import UdfContext

    class Config:
        FUNCTION_FACTORY_CLASSES: list = []

    catalog = build_catalog(Config())
    register(spark, catalog, UdfContext((ROOT / "descriptors" / "examples.desc").read_bytes()))
    spark.sql(SETUP).cache().createOrReplaceTempView("bench_input")
    spark.sql("SELECT count(*) FROM bench_input").collect()
    results = []
    for name, (call, builtin) in CASES.items():
        expression = rewrite_sql(f"SELECT {call}", catalog.macros)[len("SELECT ") :]
        row = {"function": name, "rows_per_s": round(_rate(spark, expression))}
        if builtin:
            row["builtin"] = builtin
            row["builtin_rows_per_s"] = round(_rate(spark, builtin))
        results.append(row)
        print(
            f"{name:28s} {row['rows_per_s']:>12,d} rows/s"
            + (f"   built-in {row['builtin_rows_per_s']:,d}" if builtin else "")
        )
    spark.catalog.clearCache()
    return results


def streaming_overhead(spark) -> dict:
    from dagger.job import Job, load_config
    from testing.broker import Broker
    from testing.descriptor_server import DescriptorServer
    from testing.produce import produce
    from testing.samples import bookings

    start = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
    with Broker() as broker, DescriptorServer(ROOT / "descriptors") as stencil:
        broker.create_topic("bench-udf-in", 2)
        values = bookings(JOB_ROWS, start, step_seconds=0.001)
        produce(broker.bootstrap, "bench-udf-in", ((None, v) for v in values), partitions=2)
        base = "order_number, service_area_id, total_distance_in_kms"
        jobs = {
            "without": f"SELECT {base} FROM data_stream_0",
            "with Distance + GeoHash": (
                f"SELECT {base}, Distance(driver_pickup_location.latitude, driver_pickup_location.longitude, "
                "-6.9, 107.6) AS d, GeoHash(driver_pickup_location.latitude, driver_pickup_location.longitude, 6) "
                "AS g FROM data_stream_0"
            ),
        }
        out = {}
        for label, sql in jobs.items():
            rates = []
            for attempt in range(3):
                broker.create_topic(f"bench-udf-out-{len(out)}-{attempt}", 2)
                stream = {
                    "SOURCE_KAFKA_TOPIC_NAMES": "bench-udf-in",
                    "INPUT_SCHEMA_TABLE": "data_stream_0",
                    "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
                    "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
                    "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": broker.bootstrap,
                    "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earliest",
                    "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": f"bench-{len(out)}-{attempt}",
                }
                config = load_config(
                    data={
                        "FLINK_JOB_ID": f"bench-udf-{len(out)}-{attempt}",
                        "FLINK_SQL_QUERY": sql,
                        "STREAMS": [stream],
                        "SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("examples.desc"),
                        "SINK_TYPE": "kafka",
                        "SINK_KAFKA_BROKERS": broker.bootstrap,
                        "SINK_KAFKA_TOPIC": f"bench-udf-out-{len(out)}-{attempt}",
                        "SINK_KAFKA_DATA_TYPE": "JSON",
                        "SPARK_MAX_RECORDS_PER_TRIGGER": "100000",
                    }
                )
                with tempfile.TemporaryDirectory() as checkpoint:
                    manager = Job(config, checkpoint_dir=checkpoint, available_now=True, spark=spark)
                    query = manager.start()
                    query.awaitTermination()
                    batches = [p for p in query.recentProgress if p["numInputRows"]]
                    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
                    rows = sum(p["numInputRows"] for p in batches)
                    rates.append(rows / busy)
            out[label] = round(sorted(rates)[1])
            print(f"job {label:26s} {out[label]:>10,d} rows/s (median of 3, {JOB_ROWS:,d} records)")
    out["ratio"] = round(out["with Distance + GeoHash"] / out["without"], 3)
    return out


def main() -> None:
    spark = _session()
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "rows": ROWS,
        "scalar_functions": scalar_rates(spark),
        "streaming_job": streaming_overhead(spark),
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "udfs.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"Function rows/s over {ROWS:,d} rows, local[2] ({results['machine']}).",
        "",
        "| function | rows/s | built-in equivalent | built-in rows/s |",
        "|---|---:|---|---:|",
    ]
    for r in results["scalar_functions"]:
        builtin = f"`{r['builtin']}`" if "builtin" in r else "—"
        builtin_rate = f"{r['builtin_rows_per_s']:,}" if "builtin" in r else "—"
        lines.append(f"| {r['function']} | {r['rows_per_s']:,} | {builtin} | {builtin_rate} |")
    job = results["streaming_job"]
    lines += [
        "",
        f"Streaming job (Kafka → decode → SQL → Kafka JSON, {JOB_ROWS:,d} records, median of 3): without functions "
        f"{job['without']:,} rows/s, with Distance + GeoHash {job['with Distance + GeoHash']:,} rows/s "
        f"(ratio {job['ratio']}; target ≥ 0.7).",
    ]
    (out / "udfs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    spark.stop()


if __name__ == "__main__":
    main()
