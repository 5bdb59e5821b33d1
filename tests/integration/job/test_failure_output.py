"""What an operator reads when a job fails: the whole console output of ``dagger run``, for each kind of failure.

A few lines, the cause last, no JVM or Python stack trace (those go to the run's log file, and one line says
where). Each test compares every line (timestamps cut, paths and ids named), not only the last one, and checks
that the trace is in the log file.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from testing.broker import free_port
from testing.produce import produce
from testing.samples import bookings
from tests.conftest import START, dagger, job, kafka_sink, kafka_stream

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

#: the JVM's own note, printed before any logging is configured
MACHINE_NOTES = ("WARNING: Using incubator modules: jdk.incubator.vector",)
_TIME = re.compile(r"^\d\d:\d\d:\d\d ")


def console(result, **names: str) -> list[str]:
    """The run's console lines (stderr), without their times and machine notes; each value of ``names`` in them
    replaced by ``{name}``."""
    lines = []
    for line in result.stderr.splitlines():
        line = _TIME.sub("", line)
        if not line.strip() or line.startswith(MACHINE_NOTES):
            continue
        for name, value in sorted(names.items(), key=lambda item: -len(item[1])):
            line = line.replace(value, "{" + name + "}")
        line = re.sub(r"rdkafka#(consumer|producer)-\d+", r"rdkafka#\1-N", line)  # numbered per process
        line = re.sub(r"\(after \d+ms in state", "(after Nms in state", line)  # librdkafka's timing: 1 ms under load
        lines.append(re.sub(r"sha256[ =][0-9a-f]{12,64}", "sha256 {sha}", line))
    return lines


def run(tmp_path, data: dict, *args: str):
    config = tmp_path / "job.json"
    config.write_text(json.dumps(data))
    log = tmp_path / "job.log"
    result = dagger("run", str(config), "--checkpoint-dir", str(tmp_path / "cp"), "--log-file", str(log), *args)
    return result, log


def over_bookings(broker, stencil, topic, name: str, sql: str, count: int = 3, **keys) -> dict:
    """A job over ``count`` bookings on a new topic (no metrics endpoint: the tests run side by side)."""
    source = topic(name)
    produce(broker.bootstrap, source, ((None, v) for v in bookings(count, START)))
    return job(stencil, [kafka_stream(broker, source)], sql, METRIC_PROMETHEUS_PORT="0", **keys)


def named(result, data: dict, tmp_path, stencil, **more: str) -> list[str]:
    """:func:`console` with the job's id, the test's directory and the descriptor URL named."""
    return console(result, job=data["FLINK_JOB_ID"], tmp=str(tmp_path), stencil=stencil.url("examples.desc"), **more)


def settled(lines: list[str]) -> list[str]:
    """The lines in a fixed order but the last (the cause): the sources' and sinks' first contact runs beside the
    planning, so their lines and the planner's interleave either way."""
    return [*sorted(lines[:-1]), *lines[-1:]]


def assert_no_trace(result) -> None:
    assert "Traceback" not in result.stderr and "\tat org.apache" not in result.stderr, result.stderr


def test_a_broker_that_never_answers(stencil, tmp_path):
    class Nowhere:
        bootstrap = "127.0.0.1:1"

    data = job(stencil, [kafka_stream(Nowhere, "bookings")], "SELECT order_number FROM data_stream_0")
    data["METRIC_PROMETHEUS_PORT"] = "0"
    data["SPARK_FIRST_CONTACT_TIMEOUT_MS"] = "3000"  # the message names the time waited (the default: 10 s)
    result, _ = run(tmp_path, data)
    assert result.returncode == 1
    assert settled(named(result, data, tmp_path, stencil)) == settled(
        [
            "INFO  dagger.schema.descriptor_sets: descriptor sets {stencil} loaded, sha256 {sha}",
            "WARNING dagger.kafka.client: FAIL [rdkafka#consumer-N] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: "
            "Connect to ipv4#127.0.0.1:1 failed: Connection refused (after Nms in state CONNECT)",
            "INFO  dagger: stream 'data_stream_0' decodes 2 of 13 fields: order_number, event_timestamp",
            "ERROR dagger: query failed: SourceError: stream 'data_stream_0': cannot list topics on 127.0.0.1:1 (no answer "
            "in 3 s, SPARK_FIRST_CONTACT_TIMEOUT_MS): 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
            "Connection refused (after Nms in state CONNECT) (check SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS and the "
            "SECURITY_PROTOCOL / SASL_* / SSL_* keys of this stream)",
        ]
    )
    assert_no_trace(result)


def test_a_descriptor_server_that_never_answers(broker, tmp_path):
    class Gone:
        def __init__(self):
            self.base = f"http://127.0.0.1:{free_port()}"

        def url(self, name: str) -> str:
            return f"{self.base}/{name}"

    gone = Gone()
    data = job(
        gone,
        [kafka_stream(broker, "bookings")],
        "SELECT order_number FROM data_stream_0",
        METRIC_PROMETHEUS_PORT="0",
        SPARK_FIRST_CONTACT_TIMEOUT_MS="3000",  # the message names the time waited (the default: 10 s)
    )
    result, _ = run(tmp_path, data)
    assert result.returncode == 2
    lines = console(result, url=gone.url("examples.desc"))
    retries = [line for line in lines if line.startswith("WARNING dagger.schema.descriptor_sets: descriptor fetch")]
    assert retries and len(lines) == len(retries) + 1, lines  # a line per retry, then the cause
    assert lines[-1].startswith(
        "dagger: SCHEMA_REGISTRY_STENCIL_URLS: cannot fetch descriptor set {url}: no answer in 3 s "
        "(SPARK_FIRST_CONTACT_TIMEOUT_MS; "
    ), lines
    assert lines[-1].endswith(
        "Check the URL, or raise SPARK_FIRST_CONTACT_TIMEOUT_MS when the server starts after the job."
    ), lines
    assert_no_trace(result)


def test_a_kafka_sink_whose_brokers_never_answer(broker, stencil, topic, tmp_path):
    class Nowhere:
        bootstrap = "127.0.0.1:1"

    sink = kafka_sink(Nowhere, "out", "dagger.examples.BookingSummaryMessage")
    data = over_bookings(
        broker,
        stencil,
        topic,
        "fo-sink",
        "SELECT order_number FROM data_stream_0",
        SPARK_FIRST_CONTACT_TIMEOUT_MS=3000,
        **sink,
    )
    result, _ = run(tmp_path, data, "--available-now")
    assert result.returncode == 1
    assert settled(named(result, data, tmp_path, stencil)) == settled(
        [
            "INFO  dagger.schema.descriptor_sets: descriptor sets {stencil} loaded, sha256 {sha}",
            "INFO  dagger: stream 'data_stream_0' decodes 2 of 13 fields: order_number, event_timestamp",
            "WARNING dagger.kafka.client: FAIL [rdkafka#producer-N] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: "
            "Connect to ipv4#127.0.0.1:1 failed: Connection refused (after Nms in state CONNECT)",
            "ERROR dagger: query failed: SinkError: sink 'kafka': no broker of SINK_KAFKA_BROKERS 127.0.0.1:1 answered in 3 s "
            "(SPARK_FIRST_CONTACT_TIMEOUT_MS): 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection "
            "refused (after Nms in state CONNECT) (check SINK_KAFKA_BROKERS; raise SPARK_FIRST_CONTACT_TIMEOUT_MS when "
            "the brokers start after the job)",
        ]
    ), result.stderr
    assert_no_trace(result)


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b'{"error": "backend down"}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # noqa: ANN002
        pass


def test_a_lookup_that_fails_with_fail_on_errors(broker, stencil, topic, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/customers/"
    lookup = {
        "endpoint": url,
        "verb": "get",
        "request_pattern": "%s",
        "request_variables": "customer_id",
        "stream_timeout": "2000",
        "connect_timeout": "1000",
        "capacity": "4",
        "fail_on_errors": "true",
        "retain_response_type": "true",
        "output_mapping": {"name": {"path": "$.name"}},
    }
    post = {"external_source": {"http": [lookup]}, "internal_source": [], "transformers": []}
    data = over_bookings(
        broker,
        stencil,
        topic,
        "fo-lookup",
        "SELECT order_number, customer_id FROM data_stream_0",
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
    )
    try:
        result, log = run(tmp_path, data, "--available-now")
    finally:
        server.shutdown()
    assert result.returncode == 1
    lines = named(result, data, tmp_path, stencil, url=url, log=str(log))
    lines[-1] = re.sub(r"\{url\}c\d", "{url}c?", lines[-1])  # the first row to fail: any of the batch's customers
    assert lines == [
        "INFO  dagger.schema.descriptor_sets: descriptor sets {stencil} loaded, sha256 {sha}",
        "INFO  dagger: stream 'data_stream_0' decodes 3 of 13 fields: order_number, customer_id, event_timestamp",
        "INFO  dagger: starting '{job}' on master local[*]: 1 stream(s) -> log, output mode append, checkpoint "
        "{tmp}/cp, descriptors sha256 {sha}",
        "INFO  dagger: the full traces are in {log} (dagger run --verbose prints them here)",
        'ERROR dagger: query failed: LookupError: HTTP.0 (GET {url}c?) answered 503: {"error": "backend down"} '
        "(fail_on_errors is true)",
    ], lines
    assert_no_trace(result)
    assert "Traceback (most recent call last)" in log.read_text()


def test_a_udf_that_raises(broker, stencil, topic, tmp_path):
    module = tmp_path / "picky.py"
    module.write_text(
        "def picky(x: str) -> str:\n    if x.endswith('3'):\n        raise ValueError(f'cannot take {x}')\n"
        "    return x\n"
    )
    data = over_bookings(
        broker,
        stencil,
        topic,
        "fo-udf",
        "SELECT PICKY(order_number) AS order_number FROM data_stream_0",
        count=5,
        PYTHON_UDF_ENABLE="true",
        PYTHON_UDF_CONFIG=json.dumps({"PYTHON_FILES": str(module)}),
    )
    result, log = run(tmp_path, data, "--available-now")
    assert result.returncode == 1
    lines = named(result, data, tmp_path, stencil, log=str(log))
    assert lines == [
        "INFO  dagger.schema.descriptor_sets: descriptor sets {stencil} loaded, sha256 {sha}",
        "INFO  dagger.python_udfs: Python UDFs from {tmp}/picky.py: PICKY",
        "INFO  dagger: stream 'data_stream_0' decodes 2 of 13 fields: order_number, event_timestamp",
        "INFO  dagger: starting '{job}' on master local[*]: 1 stream(s) -> log, output mode append, checkpoint "
        "{tmp}/cp, descriptors sha256 {sha}",
        "INFO  dagger: the full traces are in {log} (dagger run --verbose prints them here)",
        "ERROR dagger: query failed: UdfError: Python UDF PICKY (picky.py) failed on input ('order-3',): "
        "ValueError: cannot take order-3",
    ], lines
    assert_no_trace(result)
    assert "ValueError: cannot take order-3" in log.read_text()


def test_sql_that_fails_on_a_row_at_run_time(broker, stencil, topic, tmp_path):
    data = over_bookings(broker, stencil, topic, "fo-sql", "SELECT CAST(order_number AS INT) AS n FROM data_stream_0")
    result, log = run(tmp_path, data, "--available-now")
    assert result.returncode == 1
    lines = named(result, data, tmp_path, stencil, log=str(log))
    assert lines == [
        "INFO  dagger.schema.descriptor_sets: descriptor sets {stencil} loaded, sha256 {sha}",
        "INFO  dagger: stream 'data_stream_0' decodes 2 of 13 fields: order_number, event_timestamp",
        "INFO  dagger: starting '{job}' on master local[*]: 1 stream(s) -> log, output mode append, checkpoint "
        "{tmp}/cp, descriptors sha256 {sha}",
        "INFO  dagger: the full traces are in {log} (dagger run --verbose prints them here)",
        "ERROR dagger: query failed: [CAST_INVALID_INPUT] The value 'order-0' of the type \"STRING\" cannot be cast "
        'to "INT" because it is malformed. Correct the value as per the syntax, or change its target type. Use '
        "`try_cast` to tolerate malformed input and return NULL instead. SQLSTATE: 22018",
    ], lines
    assert "StreamingQueryException" in log.read_text()
    assert_no_trace(result)


def test_a_bigtable_that_never_answers(broker, stencil, topic, tmp_path):
    source = topic("fo-bigtable")
    gone = f"127.0.0.1:{free_port()}"  # nothing listens there
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT customer_id AS longbow_key, order_number AS longbow_data1, event_timestamp, rowtime, "
        "'30d' AS longbow_duration FROM data_stream_0",
        PROCESSOR_LONGBOW_ASYNC_TIMEOUT="2000",
        PROCESSOR_LONGBOW_GCP_TABLE_ID="history",
        METRIC_PROMETHEUS_PORT="0",
    )
    config = tmp_path / "job.json"
    config.write_text(json.dumps(data))
    result = dagger("run", str(config), "--checkpoint-dir", str(tmp_path / "cp"), env={"BIGTABLE_EMULATOR_HOST": gone})
    assert result.returncode == 1
    lines = named(result, data, tmp_path, stencil)
    assert lines[:2] == [
        "INFO  dagger.schema.descriptor_sets: descriptor sets {stencil} loaded, sha256 {sha}",
        "INFO  dagger: stream 'data_stream_0' decodes 3 of 13 fields: order_number, customer_id, event_timestamp",
    ], lines
    assert len(lines) == 3 and lines[-1].startswith(
        "dagger: Longbow cannot check or create its Bigtable table projects/default-gcp-project/instances/"
        f"default-gcp-project/tables/history at {gone} within 2 s (PROCESSOR_LONGBOW_ASYNC_TIMEOUT): "
        "ServiceUnavailable: failed to connect"
    ), lines
    assert_no_trace(result)
