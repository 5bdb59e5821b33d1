"""Shared fixtures: Apache Kafka (KRaft, one node), a descriptor HTTP server and one local Spark session."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dagger.job import load_config
from testing.produce import consume_all, produce
from testing.samples import bookings

if TYPE_CHECKING:
    from dagger.plugins.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTORS = ROOT / "descriptors"
START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")
# the tests' Spark drivers (the session fixture's and every `dagger run` a test starts; Spark's launcher gives
# SPARK_SUBMIT_OPTS to the driver's JVM) compile with the JIT's first tier only: a test's JVM lives seconds, and C2's
# compiling was a third of the CPU (make test keeps both cores busy): two test files took 102 CPU-s with both tiers,
# 68 with the first. Production and make bench keep Spark's defaults.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")
# the s3 fixture's credentials, set before any Spark Python worker starts (workers keep the environment they
# started with); the AWS SDK's default of checksumming every upload sends aws-chunked bodies with a trailer, which
# moto stores undecoded on some paths: checksums only where the API requires them, as older SDKs did
for _key, _value in {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
}.items():
    os.environ.setdefault(_key, _value)


# fixtures that start a real server or a Spark session: a test using any of them is an integration test, marked
# here so that `pytest -m "not integration"` is the fast unit layer whatever a module declares
INTEGRATION_FIXTURES = frozenset(
    {"broker", "topic", "spark", "influx", "bigquery", "bigtable", "postgres", "elasticsearch", "s3", "registry"}
)


#: files whose tests take minutes (measured with --durations: a cluster run, image and dist builds, the bench's and
#: the soak's subprocesses), run first so that `make test`'s workers (--dist loadfile, without xdist's
#: reordering by test count, which put them last) end together instead of one waiting on the others
SLOW_FILES = (
    "test_packaging.py",
    "test_image_chart_run.py",
    "test_bench.py",
    "test_soak.py",
    "test_cli_jobs.py",
    "test_jvm_classes.py",
    "test_longbow.py",
    "test_failures.py",
    "test_schema_refresh.py",
    "test_sink_outages.py",
    "test_security.py",
    "test_state_bounds.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order


def _serve(what: str, server):
    """Start a local server for the session; a server that cannot start fails the test with the reason."""
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()
        pytest.fail(f"cannot start {what}: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def broker():
    from testing.broker import Broker

    yield from _serve("Apache Kafka", Broker())


@pytest.fixture(scope="session")
def stencil():
    from testing.descriptor_server import DescriptorServer

    with DescriptorServer(DESCRIPTORS) as server:
        yield server


@pytest.fixture(scope="session")
def influx():
    from testing.influx import InfluxServer

    yield from _serve("InfluxDB", InfluxServer())


@pytest.fixture(scope="session")
def bigtable():
    """The Cloud CLI's Bigtable emulator (cbtemulator), for Longbow."""
    from testing.bigtable_emulator import BigtableEmulator

    yield from _serve("the Bigtable emulator", BigtableEmulator())


@pytest.fixture(scope="session")
def bigquery():
    """bqemulator with a 256 KiB request cap, so a single oversized row is refused by the server."""
    from testing.bigquery_emulator import BigQueryEmulator

    yield from _serve("the BigQuery emulator", BigQueryEmulator(max_request_bytes=256 * 1024))


@pytest.fixture(scope="session")
def postgres():
    from testing.postgres import PostgresServer

    yield from _serve("PostgreSQL", PostgresServer())


@pytest.fixture(scope="session")
def elasticsearch():
    """osmem-server: a real HTTP server speaking the OpenSearch/Elasticsearch document API, in memory."""
    try:
        from osmem_server import OsmemServer
    except ImportError:
        pytest.fail("osmem-server is not installed: run `make install` (it is in the test extras)")
    server = OsmemServer.start(addr="127.0.0.1:0")
    yield server
    server.close()


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    from dagger.session.spark import DEFAULT_CONF, local_settings, use_worker_python

    use_worker_python()
    builder = SparkSession.builder.master("local[2]").appName("dagger-tests")
    conf = {**local_settings(), **DEFAULT_CONF}
    conf.update({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _no_query_outlives_its_test(request):
    """Tests share one Spark session: a streaming query a test leaves running is stopped, and the test fails."""
    yield
    if "spark" not in request.fixturenames:
        return
    session = request.getfixturevalue("spark")
    left = [q for q in session.streams.active]
    for query in left:
        query.stop()
    if left:
        pytest.fail(f"the test left {len(left)} streaming queries running: {[q.name or q.id for q in left]}")


@pytest.fixture
def schema_registry():
    """A Confluent-compatible Schema Registry (testing.schema_registry) on a free loopback port, empty per test."""
    from testing.schema_registry import SchemaRegistry

    yield from _serve("the test schema registry", SchemaRegistry())


@pytest.fixture
def topic(broker):
    """A fresh topic name factory: topic("bookings", partitions=2)."""

    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        broker.create_topic(name, partitions)
        return name

    return make


def kafka_stream(
    broker,
    topic_pattern: str,
    table: str = "data_stream_0",
    proto: str = "dagger.examples.BookingLogMessage",
    ts: int = 5,
    **extra,
) -> dict:
    stream = {
        "SOURCE_KAFKA_TOPIC_NAMES": topic_pattern,
        "INPUT_SCHEMA_TABLE": table,
        "INPUT_SCHEMA_PROTO_CLASS": proto,
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": str(ts),
        "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": broker.bootstrap,
        "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earliest",
        "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": f"g-{uuid.uuid4().hex[:8]}",
        "SOURCE_DETAILS": [{"SOURCE_NAME": "KAFKA_CONSUMER", "SOURCE_TYPE": "UNBOUNDED"}],
    }
    stream.update(extra)
    return stream


def job(stencil, streams: list[dict], sql: str, **extra) -> dict:
    data = {
        "FLINK_JOB_ID": f"test-{uuid.uuid4().hex[:6]}",
        "FLINK_SQL_QUERY": sql,
        "FLINK_WATERMARK_DELAY_MS": "10000",
        "STREAMS": json.dumps(streams),  # Dagger's JSON-in-a-string form
        "SINK_TYPE": "log",
        "SPARK_MAX_RECORDS_PER_TRIGGER": "100000",
    }
    if stencil is not None:  # None: a job with no protobuf in it, and no descriptor set
        data["SCHEMA_REGISTRY_STENCIL_URLS"] = stencil.url("examples.desc")
    data.update({k: str(v) if not isinstance(v, (dict, list)) else v for k, v in extra.items()})
    return data


def run_job(spark, data: dict, checkpoint: Path, available_now: bool = True):
    """Run a job to completion in the shared session; returns (Job, query)."""
    from dagger.job import Job, load_config

    config = load_config(data=data)
    manager = Job(config, checkpoint_dir=str(checkpoint), available_now=available_now, spark=spark)
    query = manager.start()
    import time

    from dagger.runner import is_drained

    deadline = time.monotonic() + 300
    try:
        while query.isActive and time.monotonic() < deadline:
            try:
                query.awaitTermination(0.5)
            except Exception:  # noqa: BLE001 - callers inspect query.exception()
                break
            # as `dagger run --available-now` does: an operator that asks for batches forever (a processing-time
            # state TTL) keeps Spark's availableNow running after the input is read; stop such a query when drained
            if available_now and not manager.bounded and query.isActive and is_drained(query):
                query.stop()
    finally:
        if query.isActive:  # timed out (or interrupted): the shared session must not keep it running
            query.stop()
    manager.finish(query)
    return manager, query


def sink_written(manager, sink: str = "kafka") -> int:
    """The rows a finished job's sink counted as written: Dagger's writer's counter, or Spark's own count
    (``numOutputRows`` of each micro-batch) for a sink Spark's Kafka sink writes (``SPARK_KAFKA_CONNECTOR``)."""
    if sink in manager.counters.progress_sinks:
        return sum(int((p.get("sink") or {}).get("numOutputRows") or 0) for p in manager.query.recentProgress)
    return manager.counters.sinks[sink]["written"].value


def output_rows(broker, manager, topic: str, expected: int, sink: str = "kafka") -> list:
    """The records of a finished job's output topic, checked against what its sink counted as written: a
    shortfall says whether rows went missing before the sink (its counter is short too) or after it."""
    rows = consume_all(broker.bootstrap, topic, expected=expected)
    written = sink_written(manager, sink)
    assert len(rows) == written, f"the sink wrote {written} records but topic {topic} holds {len(rows)}"
    return rows


def dropped(query, table: str = "data_stream_0") -> int:
    """The invalid records a finished streaming query counted and dropped for ``table`` (its observed metric)."""
    return sum(
        p["observedMetrics"][f"invalid_records_{table}"]["count"]
        for p in query.recentProgress
        if p.get("observedMetrics")
    )


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (to build raw records by hand)."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def kafka_sink(broker, topic: str, message: str, **extra) -> dict:
    out = {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "SINK_KAFKA_TOPIC": topic,
        "SINK_KAFKA_PROTO_MESSAGE": message,
    }
    out.update(extra)
    return out


@pytest.fixture(scope="session")
def s3():
    """moto's S3-compatible server on a free loopback port, with one bucket; yields a location factory."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        pytest.fail("moto is not installed: run `make install` (moto[server] is in the test extras)")
    from pyarrow import fs

    from testing.broker import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()

    endpoint = f"127.0.0.1:{port}"
    fs.S3FileSystem(endpoint_override=endpoint, scheme="http", allow_bucket_creation=True).create_dir("checkpoints")

    def location(name: str) -> str:
        return f"s3://checkpoints/{name}-{uuid.uuid4().hex[:6]}?endpoint_override={endpoint}&scheme=http"

    location.endpoint = endpoint
    yield location
    server.stop()


def dagger(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dagger", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def validate_here(spark, *args: str) -> subprocess.CompletedProcess:  # noqa: ANN001
    """``dagger validate ARGS`` run by the command's own code in this process, on the worker's Spark session (the
    local session a ``dagger validate`` subprocess would start for ``--full`` or Spark's analysis: the command takes
    the active one): its exit code and output as :func:`dagger` returns them, without a JVM of its own. The tests
    of the command line as a process (its exit codes, its console, its environment) call :func:`dagger`."""
    import contextlib
    import io
    import logging

    from dagger import cli

    assert spark is not None  # the session the command finds active
    paths = [a for a in args if a.endswith(".json")]
    given = json.loads(Path(paths[0]).read_text()) if paths else {}
    assert str(given.get("PYTHON_UDF_ENABLE", "false")).lower() != "true", (
        "a job with Python files adds them to its session (SparkContext.addFile), where another test's file of the "
        "same name would clash: validate it with dagger()"
    )
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers[:] = []  # the command's logging.basicConfig(force=True) closes the handlers it replaces: not pytest's
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["validate", *args])
    except SystemExit as exc:  # argparse's own exits
        code = exc.code if isinstance(exc.code, int) else 2
    finally:
        for handler in root.handlers:  # the command's, on the captured stderr
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    return subprocess.CompletedProcess(["dagger", "validate", *args], code, out.getvalue(), err.getvalue())


# -- jobs with processors (shared by the processor and lookup tests) ----------------------------------------

BASE_SQL = (
    "SELECT order_number, customer_id, service_area_id, amount_paid_by_cash, driver_id, "
    "driver_pickup_location AS pickup, rowtime FROM data_stream_0"
)


def json_sink(broker, topic: str) -> dict:
    return {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "SINK_KAFKA_TOPIC": topic,
        "SINK_KAFKA_DATA_TYPE": "JSON",
    }


def run_processed(
    spark,
    broker,
    stencil,
    topic,
    tmp_path,
    sql=BASE_SQL,
    post=None,
    pre=None,
    count=12,
    expected=None,
    job_keys=None,
    **stream_keys,
):
    """Produce ``count`` bookings, run the job bounded (every record, then exit) and return the JSON rows.

    ``job_keys`` are job-level config keys; other keyword arguments go to the stream."""
    source, out = topic("proc-src"), topic("proc-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(count, START, step_seconds=60)))
    stream_keys.setdefault("SOURCE_KAFKA_ENDING_OFFSETS", "latest")
    extra = {**json_sink(broker, out), **(job_keys or {})}
    if post is not None:
        extra.update(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post))
    if pre is not None:
        extra.update(PROCESSOR_PREPROCESSOR_ENABLE="true", PROCESSOR_PREPROCESSOR_CONFIG=json.dumps(pre))
    data = job(stencil, [kafka_stream(broker, source, **stream_keys)], sql, **extra)
    manager, run = run_job(spark, data, tmp_path / "cp")
    assert run.exception() is None, run.exception()
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=expected or count)]
    return manager, rows


STAR = {"output_field": "*", "type": "sql", "value": "*"}
IDS_SQL = "SELECT order_number, customer_id FROM data_stream_0"


def failing_run(spark, broker, stencil, topic, tmp_path, post, count=5, sql=IDS_SQL) -> str:
    """Run a post-processed job over ``count`` bookings that must fail; returns its error text."""
    from dagger.job import Job

    source, out = topic("fail-src"), topic("fail-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(count, START)))
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_ENDING_OFFSETS="latest")],
        sql,
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
        **json_sink(broker, out),
    )
    run = Job(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), spark=spark).start()
    try:
        run.awaitTermination(120)
    except Exception:  # noqa: BLE001, S110 - the failure is read from run.exception() below
        pass
    finally:
        if run.isActive:
            run.stop()
    assert run.exception() is not None, "the job was expected to fail"
    return str(run.exception())


def plan_post(spark, broker, stencil, post, **job_keys):
    """Plan (nothing runs) a job over a topic that does not exist with ``post`` as its post-processor."""
    from dagger.job import Job

    data = job(
        stencil,
        [kafka_stream(broker, "never-created")],
        IDS_SQL,
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
        **job_keys,
    )
    return Job(load_config(data=data), spark=spark).validate()


# -- BigQuery (the emulator fixture's project) ------------------------------------------------------------


def bigquery_keys(bigquery, table: str, message: str = "dagger.examples.BookingLogMessage", **extra) -> dict:
    keys = {
        "SINK_TYPE": "bigquery",
        "SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID": bigquery.project,
        "SINK_BIGQUERY_DATASET_NAME": "dagger_tests",
        "SINK_BIGQUERY_TABLE_NAME": table,
        "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS": message,
        "SINK_BIGQUERY_ANONYMOUS_CREDENTIALS": "true",
        "SINK_BIGQUERY_API_ENDPOINT": bigquery.rest_endpoint,
        "SINK_BIGQUERY_STORAGE_API_ENDPOINT": bigquery.grpc_endpoint,
    }
    keys.update(extra)
    return keys


def bigquery_rows(bigquery, table: str, order: str = "order_number") -> list[dict]:
    sql = f"SELECT * FROM `{bigquery.project}.dagger_tests.{table}` ORDER BY {order}"
    return [dict(r) for r in bigquery.client().query(sql).result()]


def bigquery_count(bigquery, table: str) -> int:
    sql = f"SELECT count(*) AS n FROM `{bigquery.project}.dagger_tests.{table}`"
    return next(iter(bigquery.client().query(sql).result())).n


def bigquery_table() -> str:
    return f"t_{uuid.uuid4().hex[:8]}"


def install_plugin_package(  # noqa: ANN001
    tmp_path: Path, monkeypatch, registry: Registry, module: str, code: str, name: str, attribute: str = ""
) -> None:
    """An installed package (``module`` + its dist-info on ``sys.path``) whose entry point in ``registry``'s group
    names ``module`` (or ``module:attribute``) under ``name``; the registry reads its entry points again on its next
    lookup."""
    import textwrap

    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n")
    target = f"{module}:{attribute}" if attribute else module
    (info / "entry_points.txt").write_text(f"[{registry.group}]\n{name} = {target}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
