"""The tests of tests/unit/telemetry/test_telemetry.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request

import pytest

from testing.broker import free_port
from testing.produce import produce
from testing.samples import bookings
from tests.conftest import START, job, kafka_stream
from tests.unit.telemetry.test_telemetry import scrape, start_job, value


@pytest.mark.integration
def test_a_running_job_reports_exact_counts_and_its_lag_falls_to_zero(broker, stencil, topic, tmp_path):
    source, out = topic("tm-src", partitions=3), topic("tm-out")
    good = list(bookings(600, START, step_seconds=1))
    records = [(None, v) for v in good]
    for i in (5, 250, 599):  # K undecodable records among them
        records.insert(i, (None, b"\xff\xff\xff not a booking"))
    produce(broker.bootstrap, source, records, partitions=3)
    port = free_port()
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")],
        "SELECT order_number FROM data_stream_0",
        SINK_TYPE="kafka",
        SINK_KAFKA_BROKERS=broker.bootstrap,
        SINK_KAFKA_TOPIC=out,
        SINK_KAFKA_DATA_TYPE="JSON",
        SPARK_MAX_RECORDS_PER_TRIGGER="60",  # a backlog: ten and more micro-batches
        METRIC_PROMETHEUS_PORT=str(port),
    )
    process = start_job(data, tmp_path, "--progress-interval", "1")
    lags, found = [], None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            found = scrape(port)
            lag = value(found, "dagger_kafka_consumer_lag_max") if found else None
            if lag is not None and value(found, "dagger_batches_total"):
                lags.append(lag)
                if lag == 0 and value(found, "dagger_source_records_total", table="data_stream_0") == 603:
                    break
            assert process.poll() is None, process.communicate()[1][-3000:]
            time.sleep(0.2)
        assert found is not None
        assert value(found, "dagger_up", job_id=data["FLINK_JOB_ID"]) == 1
        assert value(found, "dagger_source_records_total", table="data_stream_0") == 603
        assert value(found, "dagger_invalid_records_total", table="data_stream_0", policy="drop") == 3
        assert max(lags) > 0 and lags[-1] == 0, lags
        deadline = time.monotonic() + 60  # the sink's counter arrives with the last batch's task results
        while value(found, "dagger_sink_records_total", sink="kafka", outcome="written") != 600:
            assert time.monotonic() < deadline, value(found, "dagger_sink_records_total", sink="kafka")
            time.sleep(0.5)
            found = scrape(port)
        assert value(found, "dagger_uptime_seconds") > 0
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        from scripts.grafana_dashboard import dashboard, metric_names

        missing = [name for name in sorted(metric_names(dashboard())) if f"# TYPE {name} " not in text]
        assert not missing, f"the dashboard queries metrics a real scrape lacks: {missing}"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    except AssertionError as failure:
        process.kill()
        stderr = process.communicate()[1]
        endpoint = [line for line in stderr.splitlines() if "METRIC_PROMETHEUS_PORT" in line or "metrics: http" in line]
        raise AssertionError(
            f"{failure}\n--- the job's metrics endpoint: {endpoint}\n--- the job's stderr ---\n{stderr[-5000:]}"
        ) from None
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-3000:]
    assert "consumer lag 0" in stderr  # the progress line shows the lag too


@pytest.mark.integration
def test_statsd_gets_the_fatal_exception_before_the_job_exits_1(broker, stencil, topic, tmp_path):
    source = topic("tm-fail")
    produce(broker.bootstrap, source, [(None, v) for v in bookings(3, START)] + [(None, b"\xff\xff garbage")])
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    data = job(
        stencil,
        [kafka_stream(broker, source)],  # the fail policy, Dagger's default
        "SELECT order_number FROM data_stream_0",
        SINK_TYPE="log",
        METRIC_PROMETHEUS_PORT="0",
        METRIC_STATSD_HOST="127.0.0.1",
        METRIC_STATSD_PORT=str(listener.getsockname()[1]),
        METRIC_STATSD_TAGS="team:data",
        METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS="1500",
        SPARK_MAX_RECORDS_PER_TRIGGER="3",  # a first micro-batch of good records ends: there are metrics to wait for
    )
    process = start_job(data, tmp_path, "--available-now")
    lines, fatal_at = [], None
    deadline = time.monotonic() + 240
    while process.poll() is None and time.monotonic() < deadline:
        try:
            packet = listener.recv(65535).decode()
        except TimeoutError:
            continue
        for line in packet.splitlines():
            lines.append(line)
            if line.startswith("fatal.exception:") and fatal_at is None:
                fatal_at = time.monotonic()
    _, stderr = process.communicate(timeout=60)
    exited_at = time.monotonic()
    listener.close()
    assert process.returncode == 1, stderr[-3000:]
    fatal = [line for line in lines if line.startswith("fatal.exception:")]
    assert fatal, lines
    assert fatal[0].startswith("fatal.exception:1|c|#job_id:")
    assert f"job_id:{data['FLINK_JOB_ID']}" in fatal[0] and "team:data" in fatal[0]
    assert "fatal_exception_type:InvalidRecordError" in fatal[0]
    assert exited_at - fatal_at >= 1.0  # METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS before the exit
    assert "waiting 1500 ms so the last metrics leave" in stderr
