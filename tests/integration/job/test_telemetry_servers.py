"""Telemetry against real servers: a lookup service with scripted failures, promtool, and a Prometheus scraping a
running job."""

from __future__ import annotations

import signal
import time
import urllib.request

import pytest

from testing.broker import free_port
from testing.lookup_server import LookupServer
from testing.produce import produce
from testing.prometheus_server import PrometheusServer, promtool_check
from testing.samples import bookings
from tests.conftest import STAR, START, job, kafka_stream, run_processed
from tests.unit.telemetry.test_telemetry import samples, start_job, value

pytestmark = pytest.mark.integration

# amount_paid_by_cash is 10 * i: rows 1-4 ask for a 404, a 500, nothing (empty id) and a timeout
IDS_SQL = (
    "SELECT order_number, CASE amount_paid_by_cash WHEN 10 THEN 'missing' WHEN 20 THEN 'boom' WHEN 30 THEN '' "
    "WHEN 40 THEN 'slow' ELSE customer_id END AS customer_id, amount_paid_by_cash, rowtime FROM data_stream_0"
)


def scraped_text(manager) -> str:  # noqa: ANN001
    from prometheus_client import CollectorRegistry, generate_latest

    from dagger.telemetry.metrics import JobMetrics
    from dagger.telemetry.prometheus import JobCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(JobMetrics(manager), manager.config.FLINK_JOB_ID))
    return generate_latest(registry).decode()


def test_lookup_outcomes_and_latency_reach_the_metrics(spark, broker, stencil, topic, tmp_path):
    with LookupServer() as lookup:
        source = {
            "endpoint": f"{lookup.url}/customers/",
            "verb": "get",
            "request_pattern": "%s",
            "request_variables": "customer_id",
            "stream_timeout": "800",
            "connect_timeout": "1000",
            "capacity": "10",
            "type": "dagger.examples.CustomerLogMessage",
            "output_mapping": {"name": {"path": "$.name"}},
        }
        post = {"external_source": {"http": [source]}, "internal_source": [STAR]}
        manager, rows = run_processed(spark, broker, stencil, topic, tmp_path, sql=IDS_SQL, post=post, count=8)
    assert len(rows) == 8
    text = scraped_text(manager)
    found = samples(text)
    calls = {
        outcome: value(found, "dagger_external_calls_total", source="HTTP.0", outcome=outcome)
        for outcome in ("success", "404", "5xx", "timeout", "empty_input")
    }
    assert calls == {"success": 4, "404": 1, "5xx": 1, "timeout": 1, "empty_input": 1}
    # every call that was made is in the latency histogram (the empty id is not a call)
    assert value(found, "dagger_external_response_seconds_count", source="HTTP.0") == 7
    assert value(found, "dagger_external_response_seconds_sum", source="HTTP.0") >= 0.8  # the timeout alone
    assert value(found, "dagger_external_response_seconds_bucket", source="HTTP.0", le="+Inf") == 7
    assert value(found, "dagger_non_fatal_exceptions_total", exception_type="LookupFailure") == 3
    assert value(found, "dagger_processor_info", stage="post", type="http") == 1
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_real_prometheus_scrapes_a_running_job(broker, stencil, topic, tmp_path):
    source = topic("prom-src")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(20, START)))
    port = free_port()
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT order_number FROM data_stream_0",
        SINK_TYPE="log",
        METRIC_PROMETHEUS_PORT=str(port),
    )
    process = start_job(data, tmp_path)
    try:
        with PrometheusServer([f"127.0.0.1:{port}"]) as prometheus:
            deadline, up, records = time.monotonic() + 180, [], []
            while time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()[1][-3000:]
                up = prometheus.query('up{job="dagger"}')
                records = prometheus.query(f'dagger_source_records_total{{job_id="{data["FLINK_JOB_ID"]}"}}')
                if up and up[0]["value"][1] == "1" and records and records[0]["value"][1] == "20":
                    break
                time.sleep(0.5)
            assert up and up[0]["value"][1] == "1", up
            assert records and records[0]["metric"]["table"] == "data_stream_0" and records[0]["value"][1] == "20"
            assert prometheus.query("dagger_up")[0]["value"][1] == "1"
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        checked = promtool_check(text)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-3000:]
