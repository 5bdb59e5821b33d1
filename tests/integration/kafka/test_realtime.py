"""Spark's real-time mode (`dagger run --real-time`, SPARK_TRIGGER_MODE=real-time): a JSON job runs on Spark's
Kafka source and sink with every record written exactly once before a clean stop; a job that cannot run in it is
refused by `dagger validate` and `dagger run` with each reason, before anything is read."""

from __future__ import annotations

import json
import signal
import time
from types import SimpleNamespace

import pytest

from testing.produce import consume_all, produce, topic_size
from testing.samples import bookings
from tests.conftest import START, dagger, job, json_sink, kafka_sink, kafka_stream, validate_here
from tests.unit.formats.test_json_input import as_json, json_stream

pytestmark = pytest.mark.integration
SQL = "SELECT order_number, amount_paid_by_cash, event_timestamp FROM data_stream_0 WHERE amount_paid_by_cash < 500"


def test_a_json_job_runs_in_real_time_mode_writes_every_record_once_and_commits_to_its_group(
    broker, stencil, topic, tmp_path
):
    source, out = topic("rt-in", 2), topic("rt-out")
    values = [as_json(v) for v in bookings(500, START)]
    kept = [json.loads(v)["order_number"] for v in values if json.loads(v)["amount_paid_by_cash"] < 500]
    first_kept = [json.loads(v)["order_number"] for v in values[:400] if json.loads(v)["amount_paid_by_cash"] < 500]
    produce(broker.bootstrap, source, ((None, v) for v in values[:200]), partitions=2)
    decoy = f"old-{source}-v1"  # holds the stream's pattern inside its name: not a topic of the stream
    broker.create_topic(decoy, 1)
    produce(broker.bootstrap, decoy, ((None, v) for v in values[:20]))
    stream = json_stream(broker, source)
    data = job(
        stencil,
        [stream],
        SQL,
        SPARK_REALTIME_CHECKPOINT_INTERVAL_MS="5000",
        METRIC_PROMETHEUS_PORT="0",
        **json_sink(broker, out),
    )
    config, log = tmp_path / "job.json", tmp_path / "run.log"
    config.write_text(json.dumps(data))
    process = _start_real_time(config, tmp_path / "cp", log)
    try:
        first = sum(1 for v in values[:200] if json.loads(v)["amount_paid_by_cash"] < 500)
        _wait_for(broker.bootstrap, out, first, process=process, log=log)
        produce(broker.bootstrap, source, ((None, v) for v in values[200:400]), partitions=2)  # while it runs
        _wait_for(broker.bootstrap, out, len(first_kept), process=process, log=log)
        # a real-time batch ends at the checkpoint interval: its end offsets then reach the group, while it runs
        _wait_for_commits(broker.bootstrap, stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"], source, 400)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert "in real-time mode" in output
    assert f"written={len(first_kept)}" in output  # the sink's count: Spark's numOutputRows of the finished batches
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=len(first_kept))]
    assert sorted(r["order_number"] for r in rows) == sorted(first_kept)  # every kept record, once
    assert topic_size(broker.bootstrap, out) == len(first_kept)

    # a new checkpoint starts where the group is: only the records produced since, none twice
    produce(broker.bootstrap, source, ((None, v) for v in values[400:]), partitions=2)
    process = _start_real_time(config, tmp_path / "cp2", log)
    try:
        _wait_for(broker.bootstrap, out, len(kept), process=process, log=log)
        _wait_for_commits(broker.bootstrap, stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"], source, 500)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
    assert code == 0, log.read_text()[-3000:]
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=len(kept))]
    assert sorted(r["order_number"] for r in rows) == sorted(kept)
    assert topic_size(broker.bootstrap, out) == len(kept)


def _wait_for_commits(bootstrap: str, group: str, topic: str, total: int, timeout: float = 120) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": "false"})
    try:
        deadline = time.monotonic() + timeout
        committed = 0
        while time.monotonic() < deadline:
            offsets = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
            committed = sum(max(tp.offset, 0) for tp in offsets)
            if committed == total:
                return
            assert committed < total, f"group {group} committed {committed} offsets of {topic}, beyond {total}"
            time.sleep(0.5)
        raise AssertionError(f"group {group} committed {committed} offsets of {topic} in {timeout} s, expected {total}")
    finally:
        consumer.close()


def _start_real_time(config, checkpoint, log):
    import subprocess
    import sys

    from tests.conftest import ROOT

    with open(log, "w") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "dagger", "run", str(config), "--real-time", "--checkpoint-dir", str(checkpoint)],
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _wait_for(bootstrap: str, out: str, count: int, timeout: float = 180, process=None, log=None) -> None:  # noqa: ANN001
    """Until ``out`` holds ``count`` records; a job ``process`` that ended meanwhile fails at once with its ``log``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if topic_size(bootstrap, out) >= count:
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(
                f"the job exited {process.returncode} before {out} held {count} records:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.5)
    raise AssertionError(f"{out} holds {topic_size(bootstrap, out)} records after {timeout} s, expected {count}")


def test_a_job_real_time_mode_cannot_run_is_refused_with_every_reason(spark, broker, stencil, topic, tmp_path):
    source, out = topic("rt-no"), topic("rt-no-out")
    sql = (
        "SELECT service_area_id, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS "
        "window_timestamp FROM data_stream_0 GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
    )
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        SPARK_TRIGGER_MODE="real-time",
        SPARK_PROTOBUF_CODEC="ptars",  # protobuf in Python workers: real-time mode takes Dagger's JVM codec only
        **kafka_sink(broker, out, "dagger.examples.BookingCountMessage"),
    )
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    validated = validate_here(spark, str(path))
    assert validated.returncode == 2, validated.stdout + validated.stderr
    problems = validated.stdout
    assert "STREAMS[data_stream_0]: protobuf is decoded by ptars in Python workers here" in problems
    assert "Spark 4.2's real-time mode runs stateless queries only" in problems
    assert "SINK_KAFKA_DATA_TYPE=PROTO is encoded by ptars in Python workers here" in problems
    ran = dagger("run", str(path), "--checkpoint-dir", str(tmp_path / "cp"), timeout=180)
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert "SPARK_TRIGGER_MODE=real-time: STREAMS[data_stream_0]: protobuf is decoded by ptars" in ran.stderr
    # with Dagger's codec (the default) only the windowed query keeps this job out
    data["SPARK_PROTOBUF_CODEC"] = "jvm"
    path.write_text(json.dumps(data))
    validated = validate_here(spark, str(path))
    assert validated.returncode == 2, validated.stdout + validated.stderr
    assert "Spark 4.2's real-time mode runs stateless queries only" in validated.stdout
    assert "ptars" not in validated.stdout
    assert topic_size(broker.bootstrap, out) == 0


def test_validate_plans_a_real_time_job_without_asking_its_brokers(spark, stencil, tmp_path):
    """`dagger validate` of a runnable real-time job whose brokers nobody answers for: OK (a run asks the group for
    its offsets; validate does not reach the brokers, in either mode)."""
    from testing.broker import free_port

    nowhere = SimpleNamespace(bootstrap=f"127.0.0.1:{free_port()}")
    data = job(
        stencil, [json_stream(nowhere, "rt-none")], SQL, SPARK_TRIGGER_MODE="real-time", **json_sink(nowhere, "o")
    )
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    validated = validate_here(spark, str(path))  # asking the brokers would end in "do not answer" after 30 s, exit 1
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "config: OK" in validated.stdout
