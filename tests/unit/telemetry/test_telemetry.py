"""Telemetry: metrics measured on the driver, scraped from a running job's Prometheus endpoint and pushed to StatsD."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dagger.job import JobCounters, load_config
from dagger.telemetry import Telemetry
from dagger.telemetry.metrics import METRICS, JobMetrics
from dagger.telemetry.prometheus import JobCollector
from dagger.telemetry.statsd import StatsdPusher, parse_tags
from testing.broker import free_port
from tests.conftest import ROOT, START

STREAM = {
    "INPUT_SCHEMA_TABLE": "bookings",
    "SOURCE_KAFKA_TOPIC_NAMES": "t",
    "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
    "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
    "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
    "SOURCE_KAFKA_INVALID_RECORD_POLICY": "drop",
}


def fake_job(**config) -> SimpleNamespace:
    data = {"FLINK_JOB_ID": "bookings", "FLINK_SQL_QUERY": "SELECT * FROM bookings", "STREAMS": [STREAM], **config}
    return SimpleNamespace(
        config=load_config(data=data),
        counters=JobCounters(),
        progress_view=lambda progress: progress,
    )


def progress(batch: int, rows: int, end: dict, latest: dict, invalid: int = 0, **extra) -> dict:
    return {
        "batchId": batch,
        "batchDuration": 1200,
        "inputRowsPerSecond": 10.0,
        "processedRowsPerSecond": 20.0,
        "eventTime": {"watermark": "2026-11-22T10:00:00.000Z"},
        "stateOperators": [{"numRowsTotal": 7, "memoryUsedBytes": 1024, "numRowsDroppedByWatermark": 2}],
        "sources": [
            {
                "numInputRows": rows,
                "startOffset": None,
                "endOffset": json.dumps({"@table": "bookings", **end}),  # listener events carry JSON text
                "latestOffset": {"@table": "bookings", **latest},  # query.lastProgress carries dicts
            }
        ],
        "observedMetrics": {"invalid_records_bookings": {"count": invalid}},
        **extra,
    }


def scrape_text(metrics: JobMetrics, job_id: str = "bookings") -> dict[tuple[str, tuple], float]:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(metrics, job_id))
    return samples(generate_latest(registry).decode())


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels) -> float | None:
    for (sample, sample_labels), v in found.items():
        if sample == name and labels.items() <= dict(sample_labels).items():
            return v
    return None


def test_progress_is_counted_once_per_batch_with_lag_per_partition():
    metrics = JobMetrics(fake_job())
    first = progress(3, 100, {"t:0": 60, "t:1": 40}, {"t:0": 90, "t:1": 40}, invalid=4)
    assert metrics.record_progress(first)
    assert not metrics.record_progress(first)  # the listener and the final poll may both hand it over
    assert metrics.record_progress(progress(4, 50, {"t:0": 90, "t:1": 60}, {"t:0": 90, "t:1": 60}, invalid=1))
    found = scrape_text(metrics)
    assert value(found, "dagger_source_records_total", table="bookings", job_id="bookings") == 150
    assert value(found, "dagger_invalid_records_total", table="bookings", policy="drop") == 5
    assert value(found, "dagger_kafka_consumer_lag", topic="t", partition="0") == 0
    assert value(found, "dagger_kafka_consumer_lag_max") == 0
    assert value(found, "dagger_late_records_dropped_total") == 4
    assert value(found, "dagger_query_restarts_total") == 1  # the first batch seen was 3: a resumed checkpoint
    assert value(found, "dagger_batch_duration_seconds_count") == 2
    assert value(found, "dagger_batch_duration_seconds_bucket", le="2.5") == 2
    assert value(found, "dagger_batch_duration_seconds_bucket", le="1.0") == 0
    assert value(found, "dagger_batch_duration_seconds_sum") == pytest.approx(2.4)
    assert value(found, "dagger_event_time_watermark_seconds") == START.replace(hour=10, minute=0).timestamp()
    assert value(found, "dagger_state_rows") == 7 and value(found, "dagger_state_memory_bytes") == 1024
    assert value(found, "dagger_non_fatal_exceptions_total", exception_type="InvalidRecord") == 5
    info = value(found, "dagger_job_info", sink_type="log", input_topics="t")
    assert info == 1


def test_a_real_time_querys_progress_counts_rows_per_stream_lag_and_the_sinks_written_rows():
    from dagger.kafka.source.spark import tagged_progress

    job = fake_job(STREAMS=[STREAM, {**STREAM, "INPUT_SCHEMA_TABLE": "other", "SOURCE_KAFKA_TOPIC_NAMES": "o.*"}])
    job.counters.progress_sinks = ["kafka.out"]
    # the sink's own accumulators, as every started job's sinks have them: Spark's sink never adds to them
    job.counters.sinks = {"kafka.out": {"written": SimpleNamespace(value=0), "dead_letters": SimpleNamespace(value=0)}}
    job.progress_view = lambda p: tagged_progress(p, job.config)
    metrics = JobMetrics(job)

    def kafka(pattern: str, end: dict, latest: dict, rows: int) -> dict:  # as Spark's Kafka source reports it
        return {
            "description": f"KafkaV2[SubscribePattern[^(?:{pattern})$]]",
            "startOffset": {"t": {"0": 0}},
            "endOffset": end,
            "latestOffset": latest,
            "numInputRows": rows,
        }

    batch = {
        **progress(0, 0, {}, {}),
        "sources": [kafka("t", {"t": {"0": 60, "1": 40}}, {"t": {"0": 90, "1": 40}}, 100), kafka("o.*", {}, {}, 3)],
        "sink": {"description": "KafkaTable", "numOutputRows": 70},
    }
    assert metrics.record_progress(batch)
    assert metrics.record_progress({**batch, "batchId": 1, "sink": {"numOutputRows": 5}})
    found = scrape_text(metrics)
    assert value(found, "dagger_source_records_total", table="bookings") == 200
    assert value(found, "dagger_source_records_total", table="other") == 6
    assert value(found, "dagger_kafka_consumer_lag", table="bookings", topic="t", partition="0") == 30
    assert value(found, "dagger_sink_records_total", sink="kafka.out", outcome="written") == 75  # one series
    assert value(found, "dagger_sink_records_total", sink="kafka.out", outcome="dead_letter") == 0
    assert metrics.snapshot().sinks == {"kafka.out": {"written": 75, "dead_letters": 0}}


def test_dead_letters_are_counted_by_origin():
    stream = {**STREAM, "SOURCE_KAFKA_DEAD_LETTER_TOPIC": "dlq", "SOURCE_KAFKA_INVALID_RECORD_POLICY": "dead-letter"}
    metrics = JobMetrics(fake_job(STREAMS=[stream]))
    metrics.record_progress(progress(0, 10, {"t:0": 10}, {"t:0": 10}, invalid=2))
    found = scrape_text(metrics)
    assert value(found, "dagger_invalid_records_total", table="bookings", policy="dead-letter") == 2
    assert value(found, "dagger_dead_letter_records_total", origin="stream:bookings") == 2


def test_records_the_invalid_record_filter_drops_are_labelled_drop_whatever_the_streams_policy():
    metrics = JobMetrics(fake_job(STREAMS=[{**STREAM, "SOURCE_KAFKA_INVALID_RECORD_POLICY": "fail"}]))
    filtered = progress(0, 10, {"t:0": 10}, {"t:0": 10})
    filtered["observedMetrics"] = {"filtered_invalid_records_bookings": {"count": 3}}
    metrics.record_progress(filtered)
    found = scrape_text(metrics)
    assert value(found, "dagger_invalid_records_total", table="bookings", policy="drop") == 3
    assert value(found, "dagger_invalid_records_total", table="bookings", policy="fail") is None


def test_lag_before_the_batch_catches_up_and_every_metric_is_documented():
    metrics = JobMetrics(fake_job())
    metrics.record_progress(progress(0, 10, {"t:0": 10}, {"t:0": 500}))
    found = scrape_text(metrics)
    assert value(found, "dagger_kafka_consumer_lag", partition="0") == 490
    assert value(found, "dagger_kafka_consumer_lag_max") == 490
    assert value(found, "dagger_query_restarts_total") == 0
    from dagger.telemetry.docs import render_metrics

    assert (ROOT / "docs" / "metrics.md").read_text() == render_metrics(), "run `make docs`"
    assert all(f"`{m.name}`" in render_metrics() for m in METRICS)


def test_statsd_lines_carry_daggers_names_the_job_id_and_counter_increases():
    metrics = JobMetrics(fake_job())
    pusher = StatsdPusher(metrics, "bookings", "127.0.0.1", 8125, parse_tags("team:data, env:prod"))
    metrics.record_progress(progress(0, 10, {"t:0": 10}, {"t:0": 10}))
    metrics.record_exception("InvalidRecordError", fatal=True)
    first = pusher.lines()
    assert "fatal.exception:1|c|#job_id:bookings,team:data,env:prod,fatal_exception_type:InvalidRecordError" in first
    assert "source.records:10|c|#job_id:bookings,team:data,env:prod,table:bookings,stream:bookings" in first
    assert any(line.startswith("records.lag.max:0|g|#job_id:bookings") for line in first)
    metrics.record_progress(progress(1, 5, {"t:0": 15}, {"t:0": 15}))
    second = pusher.lines()
    assert (
        "source.records:5|c|#job_id:bookings,team:data,env:prod,table:bookings,stream:bookings" in second
    )  # the increase
    assert not any(line.startswith("fatal.exception:") for line in second)  # nothing new


def test_the_runner_names_the_failure_type():
    from dagger.runner import exception_type

    assert exception_type(RuntimeError("InvalidRecordError: stream 'b' topic t partition 0 offset 3")) == (
        "InvalidRecordError"
    )
    assert exception_type(RuntimeError("boom\n  at org.apache.kafka.common.errors.TimeoutException")) == (
        "TimeoutException"
    )
    assert exception_type(ValueError("plain")) == "ValueError"


# -- a running job --------------------------------------------------------------------------------------------------


def scrape(port: int) -> dict | None:
    try:
        return samples(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())
    except OSError:
        return None


def start_job(data: dict, tmp_path, *extra: str) -> subprocess.Popen:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    return subprocess.Popen(
        [sys.executable, "-m", "dagger", "run", str(path), "--checkpoint-dir", str(tmp_path / "cp"), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


def test_a_job_that_failed_before_its_first_micro_batch_ended_does_not_wait_for_metrics_to_leave(caplog):
    import logging

    telemetry = Telemetry(
        fake_job(METRIC_PROMETHEUS_PORT=str(free_port()), METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS="30000")
    )
    with caplog.at_level(logging.INFO, logger="dagger"):
        telemetry.close(failed=True)
    assert "last metrics leave" not in caplog.text
    telemetry = Telemetry(fake_job(METRIC_PROMETHEUS_PORT=str(free_port()), METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS="300"))
    telemetry.metrics.record_progress(progress(0, 5, {"bookings:0": 5}, {"bookings:0": 5}))
    with caplog.at_level(logging.INFO, logger="dagger"):
        telemetry.close(failed=True)
    assert "waiting 300 ms so the last metrics leave" in caplog.text


def test_the_progress_line_is_a_view_of_the_metrics_that_record_each_batch_once(caplog):
    """One observer: the listener and the runner's final poll may both hand a batch over; it counts once, and the
    progress line shows what the metrics hold (late rows since the last line and since start, lag, sinks)."""
    import logging

    from dagger.progress import ProgressReporter

    metrics = JobMetrics(fake_job())
    first = progress(0, 5, {"bookings:0": 5}, {"bookings:0": 9}, numInputRows=5)
    assert metrics.record_progress(first) and not metrics.record_progress(first)  # the second hand-over is ignored
    reporter = ProgressReporter(metrics)
    query = SimpleNamespace(lastProgress=first)
    with caplog.at_level(logging.INFO, logger="dagger"):
        reporter.report(query)
        metrics.record_progress(progress(1, 4, {"bookings:0": 9}, {"bookings:0": 9}, numInputRows=4))
        reporter.report(query, final=True)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("batch 0: 5 input rows (20 rows/s), consumer lag 4, watermark 2026-11-22T10:00:00")
    assert lines[0].endswith("late rows dropped 2 (2 since start)")
    assert lines[1].startswith("final batch 1: 4 input rows") and "consumer lag 0" in lines[1]
    assert lines[1].endswith("late rows dropped 2 (4 since start)")
    assert reporter.late_rows == metrics.late == 4


def test_polling_a_running_query_records_every_finished_batch_once(spark):
    """The runner polls the query between its waits: batches finished in between come in one piece, in order,
    each recorded once, whether one or many finished since the last poll."""
    from dagger.telemetry import Telemetry, finished_batches

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 50)
        .load()
        .writeStream.format("noop")
        .trigger(processingTime="50 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while (query.lastProgress or {}).get("batchId", -1) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()  # nothing moves while the test looks
        last = query.lastProgress["batchId"]
        assert last >= 5
        everything = finished_batches(query, -1)
        assert [p["batchId"] for p in everything] == list(range(last + 1))  # several since: from the retained ones
        assert sum(p["numInputRows"] for p in everything) > 0
        assert [p["batchId"] for p in finished_batches(query, last - 1)] == [last]  # one since: the last alone
        assert finished_batches(query, last) == []

        telemetry = Telemetry(fake_job())
        telemetry.attach()
        telemetry.poll(query)
        telemetry.poll(query)  # nothing new: nothing counted twice
        assert telemetry.metrics.batches == last + 1
        assert telemetry.metrics.last_batch == last
        assert telemetry.metrics.phase_seconds["triggerExecution"] == pytest.approx(
            sum(p["durationMs"]["triggerExecution"] for p in everything) / 1000
        )
    finally:
        query.stop()
