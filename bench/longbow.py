"""Longbow benchmark (``make bench-longbow``).

1. **Bigtable calls**: what the executors' store does per Arrow batch, alone, in one process against the Cloud
   CLI's Bigtable emulator on the same 2 cores: ``BENCH_LONGBOW_ROWS`` rows over 1,000 keys written in
   ``MutateRows`` calls of 10,000 rows, then each row's 30-day history read 10,000 rows at a time as a task reads
   an Arrow batch (overlapping ranges merged, ``ReadRows`` calls of up to 1,000 ranges, 30 in flight). Reports
   writes/s, reads/s (one read = one row's history), reads per CPU-second of the process, and each call's response
   time (p50 / p99). Target: at least 5,000 reads/s per core.
2. **Jobs**: rows/s through a classic Longbow job (each booking's history over 30 days of one of 1,000 keys,
   JSON to Kafka) reading ``BENCH_LONGBOW_JOB_ROWS`` records from the embedded broker to their end in
   ``BENCH_LONGBOW_BATCHES`` micro-batches (10: the histories grow across them), with the history
   on the emulator and on Spark's state store (``PROCESSOR_LONGBOW_STORE=state``), against the same job without
   Longbow. Median of ``BENCH_LONGBOW_RUNS`` (else ``BENCH_RUNS``, else 3) runs each; the Bigtable job's calls'
   mean response time per role from the job's own ``dagger_longbow_response_seconds`` histograms.

Writes ``bench/results/longbow.json`` and ``bench/results/longbow.md`` (``BENCH_RESULTS_DIR``). ``make bench``
runs it as its ``longbow`` part and quotes it in its own table.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")

ROWS = int(os.environ.get("BENCH_LONGBOW_ROWS", "100000"))
JOB_ROWS = int(os.environ.get("BENCH_LONGBOW_JOB_ROWS", "100000"))
BATCHES = int(os.environ.get("BENCH_LONGBOW_BATCHES", "10"))  # micro-batches per job: the histories grow across them
RUNS = int(os.environ.get("BENCH_LONGBOW_RUNS") or os.environ.get("BENCH_RUNS") or "3")
WARMUP_RUNS = int(os.environ.get("BENCH_LONGBOW_WARMUP_RUNS", "1"))  # untimed runs of each job first: warm-up
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR", str(ROOT / "bench" / "results")))
KEYS = 1000
DAY_MS = 86_400_000


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _percentiles(ms: list[float]) -> dict:
    ordered = sorted(ms)
    at = lambda q: round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)  # noqa: E731
    return {"calls": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99)} if ordered else {"calls": 0}


def store_calls() -> dict:
    """Writes and reads of the store alone (part 1)."""
    from dagger.longbow.bigtable import BigtableStore, TableName, ensure_table, row_key, scan_all

    name = TableName("bench", "longbow", f"calls-{uuid.uuid4().hex[:6]}")
    ensure_table(name, 90 * DAY_MS)
    store = BigtableStore(name, 60.0)
    start_ms = 1_790_000_000_000
    keys = [f"customer-{i % KEYS}" for i in range(ROWS)]
    times = [start_ms + i * 60_000 for i in range(ROWS)]  # a row a minute: 1,000 keys, one booking each 1,000 min
    values = [f"{i * 10}" for i in range(ROWS)]
    began, cpu = time.monotonic(), _cpu()
    for first in range(0, ROWS, 10_000):
        part = range(first, min(first + 10_000, ROWS))
        failed = store.write(
            [row_key(keys[i], times[i]) for i in part],
            [times[i] * 1000 for i in part],
            {"longbow_data_cash": [values[i] for i in part]},
        )
        assert not failed, f"{len(failed)} writes failed"
    wrote = time.monotonic() - began
    write_calls = [ms for _, _, ms in store.take_timings()]
    ranges = [(row_key(keys[i], times[i]), row_key(keys[i], times[i] - 30 * DAY_MS)) for i in range(ROWS)]
    began, cpu_read = time.monotonic(), _cpu()
    found = 0
    for first in range(0, ROWS, 10_000):  # an Arrow batch's worth at a time, as a task reads
        rows, failed, errors = scan_all(store, ranges[first : first + 10_000], ["longbow_data_cash"], 30)
        assert not failed, errors
        found += len(rows)
    read = time.monotonic() - began
    read_cpu = _cpu() - cpu_read
    read_calls = [ms for _, _, ms in store.take_timings()]
    store.close()
    calls = -(-ROWS // 1000)
    return {
        "rows": ROWS,
        "writes_per_s": round(ROWS / wrote),
        "reads_per_s": round(ROWS / read),
        "reads_per_cpu_s": round(ROWS / read_cpu) if read_cpu else None,
        "ms_per_1000_reads": round(read * 1000 / calls, 1),
        "documents_per_s": round(found / read),  # stored rows transferred: the emulator sends one message each
        "cpu_s": round(_cpu() - cpu, 2),
        "write_call": _percentiles(write_calls),  # MutateRows of 10,000 rows
        "read_call": _percentiles(read_calls),  # ReadRows of up to 1,000 merged ranges
    }


def _job(stencil, broker, source: str, out: str, extra: dict, longbow: bool) -> dict:
    # 1,000 keys (the samples' cash is 10 x the booking number): a key books every 1,000 s of event time, so a
    # row's 30-day history holds up to BENCH_LONGBOW_JOB_ROWS / 1,000 values
    key = "CAST(amount_paid_by_cash % 10000 AS STRING)"
    sql = (
        f"SELECT {key} AS longbow_key, CAST(amount_paid_by_cash AS STRING) AS longbow_data_cash, "
        "event_timestamp, rowtime, '30d' AS longbow_duration FROM data_stream_0"
        if longbow
        else f"SELECT {key} AS customer, CAST(amount_paid_by_cash AS STRING) AS cash, event_timestamp, "
        "rowtime FROM data_stream_0"
    )
    return {
        "FLINK_JOB_ID": f"bench-longbow-{uuid.uuid4().hex[:6]}",
        "FLINK_SQL_QUERY": sql,
        "FLINK_WATERMARK_DELAY_MS": "10000",
        "STREAMS": json.dumps(
            [
                {
                    "SOURCE_KAFKA_TOPIC_NAMES": source,
                    "INPUT_SCHEMA_TABLE": "data_stream_0",
                    "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
                    "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
                    "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": broker.bootstrap,
                    "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earliest",
                    "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": f"bench-{uuid.uuid4().hex[:6]}",
                }
            ]
        ),
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "SINK_KAFKA_TOPIC": out,
        "SINK_KAFKA_DATA_TYPE": "JSON",
        "SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("examples.desc"),
        "PROCESSOR_LONGBOW_GCP_PROJECT_ID": "bench",
        "PROCESSOR_LONGBOW_GCP_INSTANCE_ID": "longbow",
        "PROCESSOR_LONGBOW_GCP_TABLE_ID": f"job-{uuid.uuid4().hex[:6]}",
        "METRIC_TELEMETRY_ENABLE": "false",
        "SPARK_MAX_RECORDS_PER_TRIGGER": str(-(-JOB_ROWS // BATCHES)),  # per micro-batch, both partitions
        **extra,
    }


def _state_size(query) -> dict:  # noqa: ANN001 - a StreamingQuery
    """The Longbow state operator's rows and bytes after the run, per key and per key-day of event time."""
    operators = [op for p in query.recentProgress for op in p.get("stateOperators") or []]
    last = operators[-1] if operators else {}
    custom = last.get("customMetrics") or {}
    size = custom.get("rocksdbSstFileSize") or last.get("memoryUsedBytes") or 0
    days = JOB_ROWS / 86_400  # a booking a second of event time
    return {
        "rows": last.get("numRowsTotal", 0),
        "bytes": size,
        "bytes_per_key": round(size / KEYS),
        "bytes_per_key_day": round(size / KEYS / days) if days else None,
        "days": round(days, 2),
    }


def _call_times(manager) -> dict:  # noqa: ANN001 - a Job
    """The Longbow job's Bigtable calls, from its own histograms: calls and mean response time per role."""
    out = {}
    for (role, outcome), histogram in manager.counters.longbow.latency.items():
        buckets, seconds = histogram.prometheus()
        if outcome == "success" and buckets[-1][1]:
            out[role] = {"calls": buckets[-1][1], "mean_ms": round(seconds * 1000 / buckets[-1][1], 1)}
    return out


def jobs() -> tuple[dict, dict, dict]:
    """Rows/s of the job without Longbow, with it on the emulator, and on the state store (part 2)."""
    import datetime as dt

    from pyspark.sql import SparkSession

    from dagger.job import Job, load_config
    from dagger.runner import is_drained
    from dagger.session.jars import session_settings
    from dagger.session.spark import DEFAULT_CONF
    from testing.broker import Broker
    from testing.descriptor_server import DescriptorServer
    from testing.produce import produce, topic_size
    from testing.samples import bookings

    builder = SparkSession.builder.master("local[2]").appName("bench-longbow")
    conf = {**session_settings(), **DEFAULT_CONF, "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    for key, value in conf.items():  # the connectors and Dagger's JVM classes (Longbow on state) on the class path
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    state: list[dict] = []
    calls: dict = {}
    results: dict[str, list[float]] = {
        "without Longbow": [],
        "Longbow on Bigtable (emulator)": [],
        "Longbow on state": [],
    }
    settings = {
        "without Longbow": ({}, False),
        "Longbow on Bigtable (emulator)": ({}, True),
        "Longbow on state": ({"PROCESSOR_LONGBOW_STORE": "state"}, True),
    }
    with Broker() as broker, DescriptorServer(ROOT / "descriptors") as stencil:
        source = f"longbow-in-{uuid.uuid4().hex[:6]}"
        broker.create_topic(source, 2)
        start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
        produce(broker.bootstrap, source, ((None, v) for v in bookings(JOB_ROWS, start, step_seconds=1)), partitions=2)
        for extra, longbow in [setting for _ in range(WARMUP_RUNS) for setting in settings.values()]:
            out = f"longbow-warm-{uuid.uuid4().hex[:6]}"  # each job's own path warmed: its JIT, its workers
            warm = load_config(data=_job(stencil, broker, source, out, extra, longbow))
            manager = Job(
                warm, checkpoint_dir=tempfile.mkdtemp(prefix="bench-longbow-"), available_now=True, spark=spark
            )
            query = manager.start()
            while query.isActive:
                query.awaitTermination(0.5)
                if query.isActive and is_drained(query):
                    query.stop()
            manager.finish(query)
        for run in range(RUNS):
            for label, (extra, longbow) in settings.items():
                out = f"longbow-out-{uuid.uuid4().hex[:6]}"
                broker.create_topic(out, 2)
                config = load_config(data=_job(stencil, broker, source, out, extra, longbow))
                checkpoint = tempfile.mkdtemp(prefix="bench-longbow-")
                manager = Job(config, checkpoint_dir=checkpoint, available_now=True, spark=spark)
                began = time.monotonic()
                query = manager.start()
                while query.isActive:
                    query.awaitTermination(0.5)
                    if query.isActive and is_drained(query):
                        query.stop()
                seconds = time.monotonic() - began
                if "state" in label:
                    state.append(_state_size(query))
                elif longbow:
                    calls = _call_times(manager)
                manager.finish(query)
                written = topic_size(broker.bootstrap, out)
                if written != JOB_ROWS:
                    raise RuntimeError(f"{label}: {written:,} rows written of {JOB_ROWS:,}")
                results[label].append(JOB_ROWS / seconds)
                print(f"[longbow] run {run + 1} {label}: {JOB_ROWS / seconds:,.0f} rows/s", flush=True)
    return {label: round(statistics.median(values)) for label, values in results.items()}, state[-1], calls


def main() -> None:
    from testing.bigtable_emulator import BigtableEmulator

    with BigtableEmulator() as emulator:
        os.environ.update(emulator.env)
        calls = store_calls()
        print(f"[longbow] store: {json.dumps(calls)}", flush=True)
        rows_per_s, state, job_calls = jobs()
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "store": calls,
        "jobs_rows_per_s": rows_per_s,
        "state": state,
        "job_calls": job_calls,
        "job_rows": JOB_ROWS,
        "runs": RUNS,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "longbow.json").write_text(json.dumps(results, indent=1) + "\n")
    base = rows_per_s["without Longbow"]
    lines = [
        "# Longbow",
        "",
        f"Generated by `make bench-longbow` (`bench/longbow.py`) on {results['machine']}, the Bigtable emulator"
        " (`cbtemulator`) and the embedded broker on the same cores.",
        "",
        "| measurement | value | target |",
        "|---|---|---|",
        f"| Bigtable writes ({calls['rows']:,} rows, `MutateRows` of 10,000) | {calls['writes_per_s']:,} rows/s | |",
        f"| Bigtable reads: one row's 30-day history each (10,000 a batch, ranges merged, 30 calls in flight) |"
        f" {calls['reads_per_s']:,} reads/s ({calls['reads_per_cpu_s'] or 0:,} per CPU-second of the process) |"
        " ≥ 5,000 per core |",
        f"| time per 1,000 reads; documents (stored rows) transferred | {calls['ms_per_1000_reads']} ms;"
        f" {calls['documents_per_s']:,} per second | |",
        f"| response time of a call: `MutateRows` of 10,000 rows; `ReadRows` of up to 1,000 ranges, p50 / p99 |"
        f" {_p(calls['write_call'])}; {_p(calls['read_call'])} | |",
        *(
            f"| job over {JOB_ROWS:,} bookings in {BATCHES} micro-batches, {label} | {value:,} rows/s"
            f" ({value / base:.2f}×) | {'≥ 0.5×' if 'state' in label else ''} |"
            for label, value in rows_per_s.items()
        ),
        "| the Bigtable job's calls (its `dagger_longbow_response_seconds`): mean response time |"
        f" {_mean(job_calls)} | |",
        f"| Longbow's state after the state job: keys, size (RocksDB SST files) | {state['rows']:,} keys, "
        f"{state['bytes']:,} bytes: {state['bytes_per_key']:,} per key, {state['bytes_per_key_day'] or 0:,} per"
        f" key-day ({KEYS:,} keys over {state['days']} days of event time) | |",
        "",
    ]
    (RESULTS / "longbow.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _p(call: dict) -> str:
    return f"{call['p50_ms']} / {call['p99_ms']} ms" if call.get("calls") else "no calls"


def _mean(calls: dict) -> str:
    return "; ".join(f"{role} {c['mean_ms']} ms over {c['calls']:,} calls" for role, c in calls.items()) or "no calls"


if __name__ == "__main__":
    main()
