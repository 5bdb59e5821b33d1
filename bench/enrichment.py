"""HTTP enrichment benchmark (``make bench-enrichment``).

1. **Lookups/s**: a bounded job over the embedded broker whose post-processor calls a local HTTP service that
   answers after 10 ms, one call per row (every row a different id, no cache), ``capacity`` 100, ``local[2]``.
   Target: at least 5,000 lookups/s per core. The service is ``bench/lookup_service.js`` (Node, its own process)
   when ``node`` is installed, else the Python test server; it shares the 2 cores with the job, so the bench
   reports both lookups/s per core of the machine and lookups per CPU-second the job's processes used.
2. **Warm cache**: the same job with ``cache_ttl_seconds`` over ids that repeat (five customers) against the
   same job without any lookup. Target: keep at least 70% of the throughput.

Each measurement is the median of 3 runs of ``plan().dataframe`` written to Spark's ``noop`` sink (the sink is
not what is measured). Writes ``bench/results/enrichment.json`` and ``bench/results/enrichment.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")

ROWS = int(os.environ.get("BENCH_ENRICH_ROWS", "200000"))
CACHE_ROWS = int(os.environ.get("BENCH_ENRICH_CACHE_ROWS", "200000"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CORES = 2


def main() -> None:
    import datetime as dt

    from pyspark.sql import SparkSession

    from dagger.job import Job, load_config
    from dagger.session.spark import DEFAULT_CONF
    from testing import proctree
    from testing.broker import Broker
    from testing.descriptor_server import DescriptorServer
    from testing.produce import produce
    from testing.samples import bookings

    builder = SparkSession.builder.master(f"local[{CORES}]").appName("bench-enrichment")
    for key, value in {**DEFAULT_CONF, "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    start = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)

    with (
        Broker() as broker,
        DescriptorServer(ROOT / "descriptors") as stencil,
        _lookup_service() as (service_url, service_kind),
    ):
        topics = {}
        for name, count in (("unique", ROWS), ("repeat", CACHE_ROWS)):
            topics[name] = f"bench-{name}-{uuid.uuid4().hex[:6]}"
            broker.create_topic(topics[name], CORES)
            produce(broker.bootstrap, topics[name], ((None, v) for v in bookings(count, start, 0.01)), partitions=CORES)

        def job(topic: str, sql: str, post: dict | None) -> dict:
            stream = {
                "SOURCE_KAFKA_TOPIC_NAMES": topic,
                "INPUT_SCHEMA_TABLE": "data_stream_0",
                "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
                "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
                "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": broker.bootstrap,
                "SOURCE_KAFKA_STARTING_OFFSETS": "earliest",
                "SOURCE_KAFKA_ENDING_OFFSETS": "latest",
                "SOURCE_DETAILS": [{"SOURCE_NAME": "KAFKA_SOURCE", "SOURCE_TYPE": "UNBOUNDED"}],
            }
            data = {
                "FLINK_JOB_ID": f"bench-{uuid.uuid4().hex[:6]}",
                "FLINK_SQL_QUERY": sql,
                "STREAMS": [stream],
                "SINK_TYPE": "log",
                "SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("examples.desc"),
            }
            if post:
                data.update(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post))
            return data

        def http(**extra) -> dict:
            source = {
                "endpoint": f"{service_url}/customers/",
                "verb": "get",
                "request_pattern": "%s",
                "request_variables": "customer_id",
                "stream_timeout": "5000",
                "connect_timeout": "2000",
                "capacity": "100",
                "type": "dagger.examples.CustomerLogMessage",
                "output_mapping": {"name": {"path": "$.name"}, "age": {"path": "$.tier"}},
            }
            source.update(extra)
            return {
                "external_source": {"http": [source]},
                "internal_source": [{"output_field": "*", "type": "sql", "value": "*"}],
            }

        jvm = proctree.jvm_pid(spark)
        cpu: list[float] = []

        def timed(data: dict, rows: int) -> tuple[float, Job]:
            times = []
            manager = None
            cpu.clear()
            for _ in range(RUNS):
                manager = Job(load_config(data=data), spark=spark)
                frame = manager.validate().dataframe
                began, used = time.perf_counter(), proctree.cpu_seconds(jvm)
                frame.write.format("noop").mode("overwrite").save()
                times.append(time.perf_counter() - began)
                cpu.append(proctree.cpu_seconds(jvm) - used)
            return rows / statistics.median(times), manager

        unique_sql = "SELECT order_number, concat(customer_id, '-', order_number) AS customer_id FROM data_stream_0"
        lookups, manager = timed(job(topics["unique"], unique_sql, http()), ROWS)
        calls = manager.counters.lookups["HTTP.0"].values()
        job_cpu = statistics.median(cpu)
        repeat_sql = "SELECT order_number, customer_id FROM data_stream_0"
        plain, _ = timed(job(topics["repeat"], repeat_sql, None), CACHE_ROWS)
        cached, manager = timed(job(topics["repeat"], repeat_sql, http(cache_ttl_seconds=600)), CACHE_ROWS)
        cache_metrics = manager.counters.lookups["HTTP.0"].values()

    spark.stop()
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "cores": CORES,
        "server_delay_ms": 10,
        "capacity": 100,
        "rows": ROWS,
        "lookups_per_s": round(lookups),
        "lookups_per_s_per_core": round(lookups / CORES),
        "lookup_service": service_kind,
        "job_cpu_seconds": round(job_cpu, 2),
        "lookups_per_job_cpu_second": round(ROWS / job_cpu),
        "target_lookups_per_s_per_core": 5000,
        "last_run_http_metrics": calls,
        "cache_rows": CACHE_ROWS,
        "rows_per_s_without_lookup": round(plain),
        "rows_per_s_with_warm_cache": round(cached),
        "warm_cache_ratio": round(cached / plain, 3),
        "target_warm_cache_ratio": 0.7,
        "last_run_cache_metrics": cache_metrics,
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "enrichment.json").write_text(json.dumps(result, indent=2) + "\n")
    table = [
        "| measurement | value | target |",
        "|---|---|---|",
        f"| lookups/s per core (10 ms server, capacity 100, no cache) | {result['lookups_per_s_per_core']:,} | ≥ 5,000 |",
        f"| lookups per CPU-second of the job's processes | {result['lookups_per_job_cpu_second']:,} | |",
        f"| rows/s without lookup | {result['rows_per_s_without_lookup']:,} | |",
        f"| rows/s with the lookup, warm cache | {result['rows_per_s_with_warm_cache']:,} | |",
        f"| warm-cache throughput ratio | {result['warm_cache_ratio']:.2f} | ≥ 0.70 |",
    ]
    text = (
        f"# HTTP enrichment ({result['machine']}, local[{CORES}])\n\n"
        + "\n".join(table)
        + f"\n\n{ROWS:,} lookups; service: {service_kind}, on the same 2 cores as the job.\n"
    )
    (out / "enrichment.md").write_text(text)
    print(text)
    print(json.dumps(result, indent=2))


@contextlib.contextmanager
def _lookup_service() -> Iterator[tuple[str, str]]:
    """The 10 ms service: Node in its own process when available, else the Python test server."""
    node = shutil.which("node")
    if node is None:
        from testing.lookup_server import LookupServer

        with LookupServer(delay_ms=10) as server:
            yield server.url, "Python test server (aiohttp, in the bench process)"
        return
    script = ROOT / "bench" / "lookup_service.js"
    process = subprocess.Popen([node, str(script), "0", "10"], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().split()
        if not line or line[0] != "listening":
            raise RuntimeError(f"{script} did not start (exit code {process.poll()})")
        yield f"http://127.0.0.1:{line[1]}", "bench/lookup_service.js (Node, its own process)"
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
