"""The `dagger` command as users run it: validate, run, restart from a checkpoint, the example configs."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing import proctree
from testing.produce import consume_all, produce, topic_size
from testing.samples import bookings, message_class
from tests.conftest import ROOT, START, dagger, job, kafka_sink, kafka_stream, validate_here

pytestmark = pytest.mark.integration
Summary = message_class("dagger.examples.BookingSummaryMessage")


def test_validate_prints_the_rewritten_sql_and_refuses_a_misfit(spark, broker, stencil, topic, tmp_path):
    source = topic("validate")
    # Dagger's join example: two streams joined on a time interval alone, windowed in Dagger's syntax
    sql = (
        "SELECT data_stream_0.service_area_id, count(1) AS booking_count, "
        "TUMBLE_END(data_stream_0.rowtime, INTERVAL '1' MINUTE) AS window_timestamp FROM data_stream_0 "
        "JOIN data_stream_1 ON data_stream_1.rowtime BETWEEN data_stream_0.rowtime AND data_stream_0.rowtime + "
        "INTERVAL '5' MINUTE GROUP BY data_stream_0.service_area_id, TUMBLE(data_stream_0.rowtime, INTERVAL '1' MINUTE)"
    )
    streams = [kafka_stream(broker, source), kafka_stream(broker, source, table="data_stream_1")]
    good = job(stencil, streams, sql, **kafka_sink(broker, "out", "dagger.examples.BookingCountMessage"))
    (tmp_path / "good.json").write_text(json.dumps(good))
    result = validate_here(spark, str(tmp_path / "good.json"))
    assert result.returncode == 0, result.stderr
    assert "WINDOW(data_stream_0.rowtime, '1 minutes').end AS window_timestamp" in result.stdout
    assert "rewritten for Spark:" in result.stdout
    assert "JOIN of data_stream_0 and data_stream_1 has no equality condition" in result.stdout
    assert "run in one partition (one task)" in result.stdout
    assert "output mode: append" in result.stdout and "OK: the job can run" in result.stdout
    bad = dict(good, FLINK_SQL_QUERY="SELECT item_tags AS service_area_id FROM data_stream_0")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    result = validate_here(spark, str(tmp_path / "bad.json"))
    assert result.returncode == 2
    assert "column 'service_area_id' (ARRAY<STRING>) cannot be written" in result.stdout
    unknown = dict(good, FLINK_SQL_QUERY="SELECT no_such_column FROM data_stream_0")
    (tmp_path / "unknown.json").write_text(json.dumps(unknown))
    result = validate_here(spark, str(tmp_path / "unknown.json"))
    assert result.returncode == 2
    assert "FLINK_SQL_QUERY is not valid Spark SQL" in result.stderr and "no_such_column" in result.stderr


def _wait_gone(pids: list[int], timeout: float) -> None:
    """Wait until none of ``pids`` runs any more (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if proctree.rss_of(p) > 0]
        if not alive:
            return
        assert time.monotonic() < deadline, f"the job's processes {alive} outlived its killed driver by {timeout} s"
        time.sleep(0.1)


def _start(config_path, checkpoint, log_path) -> subprocess.Popen:
    """`dagger run` in the background; its output goes to a file (an unread pipe would fill and stall it)."""
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dagger",
                "run",
                str(config_path),
                "--checkpoint-dir",
                str(checkpoint),
                "--progress-interval",
                "1",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _wait_for_output(bootstrap, topic, at_least, process, log_path, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(consume_all(bootstrap, topic, idle_seconds=0.5, timeout=5)) >= at_least:
            return
        if process.poll() is not None:
            break
        time.sleep(1)
    process.kill()
    process.wait(30)
    raise AssertionError(
        f"fewer than {at_least} records reached {topic} within {timeout}s (exit code {process.returncode});"
        f" the job's output ends with:\n{log_path.read_text()[-4000:]}"
    )


def _written(log: Path | str) -> int:
    """The records a run's Kafka sink counted as written (the last of its progress lines' running totals)."""
    text = log.read_text() if isinstance(log, Path) else log
    totals = re.findall(r"sinks: (?:.*; )?kafka written=(\d+)", text)
    return int(totals[-1]) if totals else 0


@pytest.mark.chaos
def test_restart_after_a_kill_loses_nothing_and_after_a_clean_stop_duplicates_nothing(broker, stencil, topic, tmp_path):
    source, out = topic("restart", 2), topic("restart-out")
    total = 3000  # at 100 records per 0.25 s trigger the job takes ~8 s: the kill and the stop land mid-stream
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START, step_seconds=0.01)), partitions=2)
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT order_number FROM data_stream_0",
        SPARK_MAX_RECORDS_PER_TRIGGER="100",
        SPARK_TRIGGER_INTERVAL_MS="250",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    config = tmp_path / "job.json"
    config.write_text(json.dumps(data))
    checkpoint = tmp_path / "cp"

    # 1. kill -9 mid-stream
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    process = _start(config, checkpoint, first_log)
    _wait_for_output(broker.bootstrap, out, 400, process, first_log)
    deadline = time.monotonic() + 60  # and for a progress line counting written records, for the check below
    while _written(first_log) == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    job_processes = proctree.tree(process.pid)  # the driver, its JVM, the fork server, daemons and workers
    process.kill()
    process.wait(30)
    _wait_gone(job_processes, 60)  # the driver's death ends the rest within moments; until then they may produce
    partial = topic_size(broker.bootstrap, out)  # exact: nothing produces to it now
    assert 400 <= partial < total - 400
    assert len(consume_all(broker.bootstrap, out, expected=partial)) == partial
    assert 0 < _written(first_log) <= partial  # what the killed run's sink counted (its last progress line) is there

    # 2. restart, then stop cleanly (SIGINT finishes the running micro-batch first)
    process = _start(config, checkpoint, second_log)
    _wait_for_output(broker.bootstrap, out, partial + 400, process, second_log)
    process.send_signal(signal.SIGINT)
    process.wait(120)
    output = second_log.read_text()
    assert process.returncode == 0, output[-2000:]
    assert "finishing the current micro-batch, then stopping" in output
    size = topic_size(broker.bootstrap, out)
    assert size == partial + _written(second_log)  # a clean stop: every delivered record was counted
    after_clean_stop = [
        Summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, expected=size)
    ]
    assert len(after_clean_stop) == size

    # 3. restart to the end
    result = dagger("run", str(config), "--checkpoint-dir", str(checkpoint), "--available-now")
    assert result.returncode == 0, result.stderr[-2000:]
    size = topic_size(broker.bootstrap, out)
    assert size == len(after_clean_stop) + _written(result.stderr)
    final = [Summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, expected=size)]
    assert len(final) == size
    counts = collections.Counter(final)
    assert set(counts) == {f"order-{i}" for i in range(total)}  # nothing lost
    duplicated = {k for k, c in counts.items() if c > 1}
    # at-least-once: only records of the micro-batch that was running at the kill may repeat; nothing after the
    # clean stop repeats
    assert len(duplicated) <= 100  # one micro-batch (SPARK_MAX_RECORDS_PER_TRIGGER)
    resumed = final[len(after_clean_stop) :]
    assert not set(resumed) & set(after_clean_stop)


def test_quickstart_example_config_runs_under_spark_submit_with_the_log_sink(broker, stencil, topic, tmp_path):
    from dagger.job import load_config

    source = "dagger-quickstart-bookings"
    if source not in broker_topics(broker):
        broker.create_topic(source, 2)
    produce(broker.bootstrap, source, ((None, v) for v in bookings(240, START, step_seconds=0.5)), partitions=2)
    env = {"KAFKA_BOOTSTRAP": broker.bootstrap, "DESCRIPTOR_URL": stencil.url("examples.desc")}
    load_config(ROOT / "configs" / "quickstart.json", environ=env)  # the shipped example is valid
    # spark-submit from a checkout, as the README shows: its --master wins over the config's SPARK_MASTER
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    command = [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false", "dagger/entry.py"]
    command += ["configs/quickstart.json", "--available-now", "--checkpoint-dir", str(tmp_path / "cp")]
    env["PYSPARK_PYTHON"] = sys.executable
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, **env})
    assert result.returncode == 0, result.stdout[-3000:]  # the driver's output is on spark-submit's stdout
    # spark-submit's PythonRunner forwards the driver's Python output on its stdout
    assert "on master local[2]:" in result.stdout
    # rows are logged on the driver's log stream (stderr), as Dagger's log sink logs them
    lines = [line for line in result.stderr.splitlines() if line.startswith("{service_area_id=")]
    # 2 minutes of events: the watermark closes the first minute only (3 areas x 40 bookings)
    assert sorted(lines) == sorted(
        f"{{service_area_id={area}, booking_count=40, total_distance_in_kms={dist}, window_timestamp=2026-11-22T10:01:00Z}}"
        for area, dist in (("jakarta", 121.0), ("bandung", 119.0), ("surabaya", 117.0))
    )


def broker_topics(broker) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics)


def test_multi_sink_example_writes_the_same_windows_to_the_log_and_influx(broker, stencil, influx, topic, tmp_path):
    import uuid

    source, db = topic("multi-sink"), f"dagger_{uuid.uuid4().hex[:6]}"
    influx.query(f'CREATE DATABASE "{db}"')
    values = bookings(240, START, step_seconds=0.5)
    values.insert(7, b"\x08\xff not a booking")
    produce(broker.bootstrap, source, ((None, v) for v in values))
    env = {
        "BOOKINGS_TOPIC": source,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "DESCRIPTOR_URL": stencil.url("examples.desc"),
        "INFLUX_URL": influx.url,
        "INFLUX_DB": db,
        "DEAD_LETTER_PATH": str(tmp_path / "dead"),
        "PYSPARK_PYTHON": sys.executable,
    }
    command = ["run", "configs/multi_sink.json", "--available-now", "--checkpoint-dir", str(tmp_path / "cp")]
    command += ["--set", "SPARK_MASTER=local[2]"]
    result = dagger(*command, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = {("jakarta", 40, 121.0), ("bandung", 40, 119.0), ("surabaya", 40, 117.0)}
    logged = [
        line for line in result.stdout.splitlines() + result.stderr.splitlines() if "tag_service_area_id=" in line
    ]
    assert len(logged) == 3
    points = influx.points(db, "booking_counts")
    assert {(p["tag_service_area_id"], p["booking_count"], p["total_distance_in_kms"]) for p in points} == expected
    assert {p["time"] for p in points} == {int((START.timestamp() + 60) * 1000)}
    assert {p["window_start"] for p in points} == {"2026-11-22T10:00:00.000000Z"}
    assert "dashboards written=3" in result.stderr
    [letters] = list((tmp_path / "dead").glob("source-data_stream_0-*.jsonl"))
    assert json.loads(letters.read_text())["coordinates"]["offset"] == 7


def test_parquet_backfill_example_emits_every_window_of_the_history(tmp_path):
    data = tmp_path / "bookings-parquet"
    made = subprocess.run(
        [sys.executable, "-m", "testing.parquet_samples", str(data)], capture_output=True, text=True, cwd=ROOT
    )
    assert made.returncode == 0, made.stderr
    env = {"BOOKINGS_PARQUET": str(data), "BOOKINGS_RANGE": "2026-11-22T09:00:00Z,2026-11-22T10:00:00Z"}
    result = dagger(
        "run",
        "configs/parquet_backfill.json",
        "--checkpoint-dir",
        str(tmp_path / "cp"),
        env={**env, "PYSPARK_PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    logged = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "booking_count=" in line]
    # hours 09 and 10 are in the range: four 30-minute windows x three areas, the last window included
    assert len(logged) == 12
    assert sum("booking_count=10," in line for line in logged) == 12
    assert "bounded run done" in result.stderr and "120 rows read" in result.stderr
