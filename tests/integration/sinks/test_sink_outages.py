"""Sink outages: the output broker gone, InfluxDB gone, the BigQuery Storage Write API answering 500.

Each sink rides out a short outage with its bounded retries (the run goes on and writes everything), fails the
micro-batch once the retries are spent (the job exits 1 and its last line names the service; nothing is dropped
in silence), and after recovery a restart from the same checkpoint delivers every row: exactly once in the
idempotent sinks (InfluxDB, BigQuery), at least once in Kafka with any repeat bounded by one micro-batch.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
import uuid

import pytest

from testing.broker import Broker, free_port
from testing.grpc_fault_proxy import GrpcFaultProxy
from testing.influx import InfluxServer
from testing.produce import consume_all, produce, topic_size
from testing.samples import bookings, message_class
from testing.tcp_proxy import TcpProxy
from tests.conftest import (
    ROOT,
    START,
    bigquery_count,
    bigquery_keys,
    bigquery_rows,
    bigquery_table,
    dagger,
    job,
    kafka_stream,
    run_job,
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

Summary = message_class("dagger.examples.BookingSummaryMessage")
PER_BATCH = 100


def _feed(broker, source: str, first: int, count: int) -> None:
    records = bookings(first + count, START, step_seconds=0.01)[first:]
    produce(broker.bootstrap, source, ((None, v) for v in records), partitions=2)


def _job(broker, stencil, source: str, sql: str, **sink) -> dict:
    return job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        SPARK_MAX_RECORDS_PER_TRIGGER=str(PER_BATCH),
        METRIC_PROMETHEUS_PORT="0",
        **sink,
    )


def _failing_run(data: dict, tmp_path, checkpoint) -> str:  # noqa: ANN001
    """``dagger run --available-now`` that must fail; returns its last line."""
    config = tmp_path / f"job-{uuid.uuid4().hex[:6]}.json"
    config.write_text(json.dumps(data))
    result = dagger("run", str(config), "--checkpoint-dir", str(checkpoint), "--available-now")
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return lines[-1]


def test_influxdb_gone_is_retried_then_fails_the_batch_and_a_restart_writes_every_point_once(
    spark, broker, stencil, topic, tmp_path
):
    source, checkpoint = topic("influx-outage", 2), tmp_path / "cp"
    sql = "SELECT order_number AS tag_order, amount_paid_by_cash AS amount, rowtime AS window_timestamp FROM data_stream_0"
    with InfluxServer() as influx, TcpProxy(("127.0.0.1", influx.port)) as proxy:
        influx.query('CREATE DATABASE "outage"')
        keys = {
            "SINK_TYPE": "influx",
            "SINK_INFLUX_URL": f"http://127.0.0.1:{proxy.port}",
            "SINK_INFLUX_DB_NAME": "outage",
            "SINK_INFLUX_MEASUREMENT_NAME": "m",
        }

        def points() -> list[str]:
            return [p["tag_order"] for p in influx.points("outage", "m")]

        # InfluxDB drops the first 3 connections: the writes are retried with back-off and land
        _feed(broker, source, 0, 300)
        proxy.reset_next(3)
        run_job(spark, _job(broker, stencil, source, sql, **keys), checkpoint)
        assert proxy.resets == 3
        assert sorted(points()) == sorted(f"order-{i}" for i in range(300))

        # failing for longer than the retries (each connection dropped): the batch fails, the job says which
        # server and what to change
        _feed(broker, source, 300, 300)
        proxy.reset_next(1000)
        last = _failing_run(_job(broker, stencil, source, sql, SINK_INFLUX_RETRIES="2", **keys), tmp_path, checkpoint)
        assert f"InfluxDB at http://127.0.0.1:{proxy.port} did not take the points after 2 retries" in last, last
        assert "SINK_INFLUX_RETRIES" in last and "Connection reset by peer" in last, last

        # gone when the job starts: it ends within SPARK_FIRST_CONTACT_TIMEOUT_MS, naming the server
        proxy.reset_next(0)
        proxy.cut()
        fast = {**keys, "SPARK_FIRST_CONTACT_TIMEOUT_MS": "2000"}
        last = _failing_run(_job(broker, stencil, source, sql, **fast), tmp_path, checkpoint)
        assert last.endswith(
            f"ERROR dagger: query failed: SinkError: sink 'influx': InfluxDB at SINK_INFLUX_URL http://127.0.0.1:{proxy.port} did not answer in 2 s "
            f"(SPARK_FIRST_CONTACT_TIMEOUT_MS): HTTPConnection(host='127.0.0.1', port={proxy.port}): Failed to "
            "establish a new connection: [Errno 111] Connection refused (check SINK_INFLUX_URL; raise "
            "SPARK_FIRST_CONTACT_TIMEOUT_MS when the server starts after the job)"
        ), last

        # back: the restart writes the failed batches again; every point once (same series and time)
        proxy.restore()
        run_job(spark, _job(broker, stencil, source, sql, **keys), checkpoint)
        counts = collections.Counter(points())
        assert set(counts) == {f"order-{i}" for i in range(600)} and set(counts.values()) == {1}


@pytest.mark.long
def test_bigquery_answering_500_is_retried_then_fails_the_batch_and_a_restart_writes_every_row_once(
    spark, broker, stencil, bigquery, topic, tmp_path
):
    source, table, checkpoint = topic("bq-outage", 2), bigquery_table(), tmp_path / "cp"
    sql = "SELECT order_number, service_type, event_timestamp, amount_paid_by_cash FROM data_stream_0"
    with GrpcFaultProxy(bigquery.grpc_endpoint) as proxy:
        keys = bigquery_keys(
            bigquery,
            table,
            "dagger.examples.BookingSummaryMessage",
            SINK_BIGQUERY_STORAGE_API_ENDPOINT=proxy.endpoint,
        )

        # the Storage Write API answers the first 4 calls with 500 (INTERNAL): retried with back-off, they land
        _feed(broker, source, 0, 300)
        proxy.fail("INTERNAL", calls=4)
        run_job(spark, _job(broker, stencil, source, sql, **keys), checkpoint)
        assert proxy.failed == 4
        assert bigquery_count(bigquery, table) == 300

        # 500s past SINK_BIGQUERY_RETRY_DEADLINE_MS, no dead-letter output: the batch fails, naming the table
        _feed(broker, source, 300, 300)
        proxy.fail("INTERNAL")
        last = _failing_run(
            _job(broker, stencil, source, sql, **{**keys, "SINK_BIGQUERY_RETRY_DEADLINE_MS": "2000"}),
            tmp_path,
            checkpoint,
        )
        assert f"the BigQuery Storage Write API at {proxy.endpoint} did not" in last, last
        assert table in last and "SINK_BIGQUERY_RETRY_DEADLINE_MS (2000 ms)" in last and "500" in last, last

        # healed: the restart appends the failed batches; pending streams of the failed run were never committed
        proxy.heal()
        run_job(spark, _job(broker, stencil, source, sql, **keys), checkpoint)
        counts = collections.Counter(r["order_number"] for r in bigquery_rows(bigquery, table))
        assert set(counts) == {f"order-{i}" for i in range(600)} and set(counts.values()) == {1}


@pytest.fixture
def proxied_output():
    """A second embedded broker, the job's output, reached through a TCP proxy the test can cut."""
    port = free_port()
    with TcpProxy(("127.0.0.1", port)) as proxy, Broker(port=port, advertised_port=proxy.port) as out_broker:
        yield out_broker, proxy


@pytest.mark.long
def test_the_output_broker_gone_fails_the_batch_after_the_delivery_timeout_and_a_restart_delivers_every_row(
    spark, broker, stencil, topic, tmp_path, proxied_output
):
    out_broker, proxy = proxied_output
    source, out, checkpoint = topic("out-outage", 2), "out-outage", tmp_path / "cp"
    out_broker.create_topic(out, 1)
    sql = "SELECT order_number FROM data_stream_0"
    keys = {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": out_broker.bootstrap,
        "SINK_KAFKA_TOPIC": out,
        "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
    }

    def orders() -> collections.Counter:
        size = topic_size(out_broker.bootstrap, out)
        return collections.Counter(
            Summary.FromString(m.value()).order_number for m in consume_all(out_broker.bootstrap, out, expected=size)
        )

    # the output broker drops the first 3 connections: librdkafka keeps the records and retries
    _feed(broker, source, 0, 300)
    proxy.reset_next(3)
    run_job(spark, _job(broker, stencil, source, sql, **keys), checkpoint)
    assert proxy.resets == 3
    assert orders() == collections.Counter(f"order-{i}" for i in range(300))

    # gone past message.timeout.ms while the job runs: the batch fails naming the topic and the undelivered records
    # (the job starts with the broker there: one gone at start ends it at first contact, tests/integration/job/
    # test_failure_output.py)
    failing = {**keys, "SINK_KAFKA_PRODUCER_CONFIG": {"message.timeout.ms": "3000"}}
    config = tmp_path / "failing.json"
    config.write_text(json.dumps(_job(broker, stencil, source, sql, **failing)))
    log = tmp_path / "failing.log"
    with open(log, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "dagger", "run", str(config), "--checkpoint-dir", str(checkpoint)],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while "starting '" not in log.read_text():  # the sink reached its broker; the query runs
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        proxy.cut()
        _feed(broker, source, 300, 300)
        process.wait(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, log.read_text()[-3000:]
    last = [line for line in log.read_text().splitlines() if line.strip()][-1]
    assert f"SINK_KAFKA_TOPIC {out}" in last and "not delivered" in last, last

    # back: the restart delivers every row; a record delivered before the cut may come twice, at most a batch
    proxy.restore()
    run_job(spark, _job(broker, stencil, source, sql, **keys), checkpoint)
    counts = orders()
    assert set(counts) == {f"order-{i}" for i in range(600)}
    assert sum(c - 1 for c in counts.values()) <= PER_BATCH
