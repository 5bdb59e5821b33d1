"""The streaming benchmark harness works: a tiny run of every part (throughput is not asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.integration


# the comparisons the README quotes (ours against the copy loop, Quix Streams and Spark's own Kafka connector); the
# other parts are variants
CORE = "baseline,stateless,stateless_spark,stateless_json_spark,quix,latency,latency_spark"


@pytest.mark.parametrize(
    "parts",
    [
        pytest.param(CORE, marks=pytest.mark.long),  # minutes: make test-long (CI runs it)
        pytest.param(
            "stateless_json,stateless_json_out,stateless_avro,window,window_spark,join,join_spark,bytewax,latency_window,"
            "latency_realtime,latency_window_spark,latency_join,latency_join_spark,stateless_ptars,stateless_dagger_jvm,"
            "stateless_spark_jvm,latency_ptars,latency_dagger_jvm,latency_spark_jvm,latency_realtime_proto,"
            "latency_spark_floor,latency_spark_floor_async,stateless_spark_floor",
            marks=pytest.mark.variant,
        ),
    ],
)
def test_a_tiny_run_of_every_part_reports_each_measurement(tmp_path, parts):
    peers = ROOT / ".venv-peers" / "bin" / "python"
    if not peers.exists():
        pytest.fail("the bench peers' venv is missing: run `make test-servers` (it builds .venv-peers)")
    env = dict(
        os.environ,
        BENCH_PARTS=parts,
        BENCH_RECORDS="6000",
        BENCH_JOIN_RECORDS="3000",  # each meets itself: exactly 3,000 outputs (checked by the harness)
        BENCH_RUNS="1",
        BENCH_WARMUP_RUNS="0",
        BENCH_EVENTS_PER_SECOND="50",  # 2 minutes of event time: the window job closes one window per key pair
        BENCH_LATENCY_RATE="500",
        BENCH_WARMUP_SECONDS="2",
        BENCH_LATENCY_SECONDS="4" if parts == CORE else "12",  # 10-second windows: at least one closes
        BENCH_REALTIME_SECONDS="12",
        BENCH_JOIN_LATENCY_RATE="500",
        BENCH_PEERS_PYTHON=str(peers),
        BENCH_RESULTS_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "streaming.py")], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "streaming.json").read_text())
    for part in parts.split(","):
        if not part.startswith("latency"):
            assert results[part]["records_per_s"] > 0, part  # and each wrote exactly the complete run's records
    table = (tmp_path / "streaming.md").read_text()
    if parts != CORE:
        assert "| stateless job over JSON input (the same records) |" in table
        assert "| stateless job over Confluent Avro input (the same records, from_avro) |" in table
        window = results["latency_window"]
        assert window["measured_records"] > 0 and window["p50_ms"] <= window["p99_ms"]
        assert "| 10-s window job, after the window closes: latency p50 / p99" in table
        real_time = results["latency_realtime"]
        assert real_time["lost"] == 0 and real_time["outputs"] == real_time["inputs_kept"] > 0
        assert real_time["measured_records"] > 0 and real_time["p50_ms"] <= real_time["p99_ms"]
        held = real_time["memory_at_peak"]
        # no fork server and no worker pool: at most Spark's one lookup of pip-installed data sources at planning
        assert "JVM" in held and "fork server" not in held, held
        assert held.get("Python workers", {}).get("processes", 0) <= 1, held
        assert "| real-time job: start-up, launch to first output |" in table
        for part in ("latency_spark_floor", "latency_spark_floor_async"):  # Spark's floor: every record copied
            floor = results[part]
            assert floor["lost"] == 0 and floor["outputs"] == floor["inputs_kept"] > 0, part
            assert floor["measured_records"] > 0 and not floor["class_archive"], part
        for part in ("latency_join", "latency_join_spark"):  # each input meets itself: one joined row each
            joined = results[part]
            assert joined["lost"] == 0 and joined["outputs"] == joined["inputs_kept"] > 0, part
            assert joined["measured_records"] > 0 and joined["p50_ms"] <= joined["p99_ms"], part
        assert results["latency_window_spark"]["measured_records"] > 0
        proto = results["latency_realtime_proto"]  # protobuf in and out in real-time mode: nothing lost either
        assert proto["format"] == "protobuf" and proto["lost"] == 0 and proto["outputs"] == proto["inputs_kept"] > 0
        for part in ("stateless_ptars", "stateless_dagger_jvm", "stateless_spark_jvm"):
            assert results[part]["cpu_seconds"] > 0 and results[part]["records_per_cpu_s"] > 0, part
        assert "| interval join, Spark's Kafka source and sink: records lost | 0 of " in table
        return
    assert results["stateless"]["vs_baseline"] > 0 and results["stateless"]["vs_quix"] > 0
    latency = results["latency"]
    assert latency["measured_records"] > 0 and 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
    assert 0 < latency["startup_s"] < 300 and latency["peak_rss_mib"] > 100
    assert 0 < latency["peak_pss_mib"] <= latency["peak_rss_mib"]
    held = latency["memory_at_peak"]
    # the defaults read and write this job in the JVM: no Python worker, daemon or fork server is started
    assert set(held) == {"JVM", "Python driver"}, held
    assert sum(k["pss_mib"] for k in held.values()) == pytest.approx(latency["peak_pss_mib"], abs=len(held))
    assert "| stateless job ÷ Quix Streams |" in table and "| start-up, launch to first output (" in table
    assert "| stateless job, protobuf (the defaults: Dagger's reader in the JVM): who holds it at the PSS peak" in table
    spark = results["latency_spark"]  # the same job on Spark's Kafka source and sink, in a process of its own
    assert spark["lost"] == 0 and spark["outputs"] == spark["inputs_kept"] > 0
    assert spark["measured_records"] > 0 and 0 < spark["p50_ms"] <= spark["p99_ms"] and spark["startup_s"] > 0
    assert spark["batch_breakdown_ms"]["addBatch"] > 0 and spark["batches_per_s"] > 0  # from Spark's progress
    assert "JVM" in spark["memory_at_peak"] and "source runners" not in spark["memory_at_peak"]


def test_a_run_that_wrote_fewer_records_than_a_complete_one_fails(broker, topic):
    sys.path.insert(0, str(ROOT / "bench"))
    import streaming

    from testing.produce import produce

    bench = streaming.Bench(broker, "unused")
    bench.expected = {"quix": 5}
    out = topic("bench-out")
    produce(broker.bootstrap, out, ((None, b"x") for _ in range(3)))
    with pytest.raises(RuntimeError, match="quix wrote 3 records, a complete run writes 5"):
        bench.finish("quix", out, launched=0.0)
    complete = topic("bench-out")
    produce(broker.bootstrap, complete, ((None, b"x") for _ in range(5)))
    assert bench.finish("quix", complete, launched=0.0) > 0


@pytest.mark.integration
@pytest.mark.long
def test_a_tiny_longbow_part_reports_reads_call_times_and_each_jobs_rows(tmp_path):
    env = dict(
        os.environ,
        BENCH_PARTS="longbow",
        BENCH_RECORDS="100",  # the part brings its own input; the harness makes its records anyway
        BENCH_LONGBOW_ROWS="3000",
        BENCH_LONGBOW_JOB_ROWS="400",
        BENCH_LONGBOW_RUNS="1",
        BENCH_LONGBOW_WARMUP_RUNS="0",
        BENCH_RESULTS_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "streaming.py")], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "longbow.json").read_text())
    store = results["store"]
    assert store["rows"] == 3000 and store["reads_per_s"] > 0 and store["writes_per_s"] > 0
    # 3,000 rows: one MutateRows (10,000 a call); their ranges merge to one per key, 1,000: one ReadRows
    assert store["write_call"]["calls"] == 1 and store["read_call"]["calls"] == 1, store
    assert 0 < store["read_call"]["p50_ms"] <= store["read_call"]["p99_ms"]
    jobs = results["jobs_rows_per_s"]
    assert set(jobs) == {"without Longbow", "Longbow on Bigtable (emulator)", "Longbow on state"}
    assert all(v > 0 for v in jobs.values())
    assert set(results["job_calls"]) == {"writer", "reader"}
    assert all(c["calls"] >= 1 and c["mean_ms"] > 0 for c in results["job_calls"].values())
    assert "| Bigtable reads: one row's 30-day history each" in (tmp_path / "longbow.md").read_text()
    table = (tmp_path / "streaming.md").read_text()
    assert "| Longbow job, 30-day history per key (400 rows" in table, table
    assert "| Longbow on Bigtable (emulator): reads per CPU-second; mean call time in the job |" in table
    assert json.loads((tmp_path / "streaming.json").read_text())["longbow"]["store"] == store
