"""What spark-submit ships to a cluster (`make dist`) holds a working job runtime."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pyspark
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dist():
    """`make dist` once for this module: dist/dagger_env.tar.gz and dist/dagger_on_spark.zip."""
    result = subprocess.run(["make", "dist"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    return ROOT / "dist"


@pytest.mark.long  # make dist: a venv installed and packed, a minute or more: make test-long (CI runs it)
def test_make_dist_builds_a_packed_environment_executors_can_run(dist, tmp_path):
    with zipfile.ZipFile(ROOT / "dist" / "dagger_on_spark.zip") as archive:
        names = set(archive.namelist())
    assert {"dagger/cli.py", "dagger/kafka/source/reader.py", "dagger/kafka/native.c", "udfs/__init__.py"} <= names
    test_support = ("testing/", "dagger/devtools/", "tests/")
    assert not [n for n in names if n.startswith(test_support)]  # no test server ships to executors
    (wheel,) = (dist / "wheel").glob("dagger_on_spark-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.namelist()
    assert "dagger/job/facade.py" in shipped
    assert not [n for n in shipped if n.startswith(test_support)]  # pip install of the wheel installs none
    with tarfile.open(ROOT / "dist" / "dagger_env.tar.gz") as archive:
        members = archive.getnames()
        assert not [m for m in members if "/site-packages/pyspark/" in m]  # the cluster's Spark provides it
        assert not [m for m in members if "/site-packages/pandas/tests/" in m or "/site-packages/pip/" in m]
        archive.extractall(tmp_path / "environment", filter="fully_trusted")
    # an executor runs the archive's Python with Spark's own pyspark.zip and py4j on PYTHONPATH
    spark_python = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    path = [os.path.join(spark_python, "pyspark.zip"), *glob.glob(os.path.join(spark_python, "py4j-*.zip"))]
    probe = "import dagger, dagger.kafka.source, dagger.serde.decode, dagger.kafka.sink, udfs; print(dagger.__file__)"
    ran = subprocess.run(
        [str(tmp_path / "environment" / "bin" / "python"), "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": os.pathsep.join(path), "PATH": os.environ["PATH"]},
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(str(tmp_path / "environment"))  # the packed copy, not the checkout
    assert sys.executable not in ran.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone cluster as `make cluster-up` starts it: a master and two one-core worker JVMs."""
    from testing.cluster import StandaloneCluster

    with StandaloneCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _submit_command(cluster, dist, config: str, *args: str) -> tuple[list[str], dict]:
    """The README's cluster command: spark-submit in client mode, Spark's connectors as --packages (resolved from
    Maven Central by Spark), the packed environment through --archives, PYSPARK_PYTHON=./environment/bin/python
    (a path that exists on the executors only)."""
    from dagger.session import jars
    from testing.cluster import spark_home

    command = [
        os.path.join(os.path.dirname(sys.executable), "spark-submit"),
        "--master",
        cluster.url,
        "--packages",
        ",".join(jars.spark_packages()),
        "--archives",
        f"{dist / 'dagger_env.tar.gz'}#environment",
        str(ROOT / "dagger" / "entry.py"),
        config,
        *args,
    ]
    env = {
        **os.environ,
        "SPARK_HOME": spark_home(),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYSPARK_PYTHON": "./environment/bin/python",
    }
    return command, env


def _submit(cluster, dist, work: Path, name: str, data: dict) -> str:
    """Run ``data`` to the end of its input on ``cluster``; returns what spark-submit printed (the driver's log)."""
    import json

    (work / f"{name}.json").write_text(json.dumps(data))
    command, env = _submit_command(cluster, dist, f"{name}.json", "--available-now")
    result = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600, env=env)
    output = result.stdout + result.stderr  # spark-submit passes the driver's stderr on as stdout
    assert result.returncode == 0, output[-4000:]
    return output


def _work(tmp_path) -> Path:
    work = tmp_path / "submit"  # a directory with no ./environment: the driver must find its own
    work.mkdir()
    return work


class _Files:
    def url(self, name: str) -> str:
        from tests.conftest import DESCRIPTORS

        return str(DESCRIPTORS / name)


@pytest.mark.long  # a standalone cluster of three JVMs, minutes: make test-long (CI runs it)
def test_the_readmes_cluster_commands_run_the_stateless_and_the_window_job_on_two_workers(
    dist, cluster, broker, topic, tmp_path
):
    """As the README tells cluster users: a standalone cluster (two worker JVMs), spark-submit in client mode with
    the packed environment through --archives and PYSPARK_PYTHON=./environment/bin/python, from a directory
    that has no such environment (the driver's data source planner used to fail on that path)."""
    import datetime as dt

    from testing.produce import consume_all, produce, topic_size
    from testing.samples import AREAS, bookings, message_class
    from tests.conftest import START, job, kafka_sink, kafka_stream

    total = 1000
    stateless_in, stateless_out = topic("cluster-in", 2), topic("cluster-out")
    produce(broker.bootstrap, stateless_in, ((None, v) for v in bookings(total, START)), partitions=2)
    window_in, window_out = topic("cluster-win", 2), topic("cluster-counts")
    produce(broker.bootstrap, window_in, ((None, v) for v in bookings(360, START, step_seconds=0.5)), partitions=2)
    jobs = {
        "stateless": job(
            _Files(),
            [kafka_stream(broker, stateless_in)],
            "SELECT order_number FROM data_stream_0",
            METRIC_PROMETHEUS_PORT="0",
            **kafka_sink(broker, stateless_out, "dagger.examples.BookingSummaryMessage"),
        ),
        "window": job(
            _Files(),
            [kafka_stream(broker, window_in)],
            "SELECT service_area_id, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS "
            "window_timestamp FROM data_stream_0 GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            METRIC_PROMETHEUS_PORT="0",
            **kafka_sink(broker, window_out, "dagger.examples.BookingCountMessage"),
        ),
    }
    work = _work(tmp_path)
    before = cluster.task_counts()
    outputs = {name: _submit(cluster, dist, work, name, data) for name, data in jobs.items()}
    tasks = [after - earlier for after, earlier in zip(cluster.task_counts(), before, strict=True)]
    assert f"{work / 'environment'} now points to the driver's environment" in outputs["stateless"]
    assert f"sinks: kafka written={total}" in outputs["stateless"]
    assert topic_size(broker.bootstrap, stateless_out) == total
    summary = message_class("dagger.examples.BookingSummaryMessage")
    rows = consume_all(broker.bootstrap, stateless_out, total)
    assert sorted(summary.FromString(m.value()).order_number for m in rows) == sorted(
        f"order-{i}" for i in range(total)
    )
    count = message_class("dagger.examples.BookingCountMessage")
    assert topic_size(broker.bootstrap, window_out) == 6 and "sinks: kafka written=6" in outputs["window"]
    counts = [count.FromString(m.value()) for m in consume_all(broker.bootstrap, window_out, 6)]
    got = sorted((r.service_area_id, r.window_timestamp.ToDatetime(dt.UTC).minute, r.booking_count) for r in counts)
    assert got == sorted((area, minute, 40) for area in AREAS for minute in (1, 2))  # as in local mode
    assert all(n > 0 for n in tasks), tasks  # both workers ran tasks


@pytest.mark.variant  # make test runs the stateless and the window job on the cluster; make test-all this too
def test_on_the_cluster_functions_darts_a_lookup_descriptors_over_http_and_every_sink_work(
    dist, cluster, broker, topic, influx, bigquery, tmp_path
):
    """One job with everything a cluster's executors must do without the driver's environment: the built-in
    Python functions (GeoHash), DARTS over HTTP, an HTTP lookup, descriptors fetched over HTTP, and the Kafka,
    InfluxDB, BigQuery and log sinks at once; the C Kafka helper is built on the executors from the archive."""
    import json
    import shutil

    import pygeohash

    from testing.descriptor_server import DescriptorServer
    from testing.lookup_server import LookupServer
    from testing.produce import consume_all, produce, topic_size
    from testing.samples import bookings
    from tests.conftest import DESCRIPTORS, START, bigquery_keys, bigquery_rows, bigquery_table, job, kafka_stream

    total = 300
    source, out, table, db = topic("cluster-all", 2), topic("cluster-all-out"), bigquery_table(), "cluster_all"
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START)), partitions=2)
    influx.query(f'CREATE DATABASE "{db}"')
    served = tmp_path / "served"
    (served / "dart-get").mkdir(parents=True)
    shutil.copy(DESCRIPTORS / "examples.desc", served / "examples.desc")
    codes = {"jakarta": "JKT", "bandung": "BDO", "surabaya": "SUB"}
    (served / "dart-get" / "areas.json").write_text(json.dumps(codes))
    sql = (
        "SELECT order_number, service_area_id, DartGet('areas.json', service_area_id, 1) AS area_code, "
        "GeoHash(driver_pickup_location.latitude, driver_pickup_location.longitude, 7) AS geohash, customer_id, "
        "amount_paid_by_cash, event_timestamp, rowtime AS window_timestamp FROM data_stream_0"
    )
    with DescriptorServer(served) as files, LookupServer() as lookup:
        lookup_config = {
            "external_source": {"http": [lookup.customers_lookup("customer_id", {"customer_name": "$.name"})]},
            "internal_source": [{"output_field": "*", "value": "*", "type": "sql"}],
        }
        data = job(
            files,
            [kafka_stream(broker, source)],
            sql,
            METRIC_PROMETHEUS_PORT="0",
            UDF_DART_BASE_URL=files.url("").rstrip("/"),
            PROCESSOR_POSTPROCESSOR_ENABLE="true",
            PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(lookup_config),
            SINKS=[
                {
                    "SINK_TYPE": "kafka",
                    "SINK_KAFKA_BROKERS": broker.bootstrap,
                    "SINK_KAFKA_TOPIC": out,
                    "SINK_KAFKA_DATA_TYPE": "JSON",
                },
                {
                    "SINK_TYPE": "influx",
                    "SINK_INFLUX_URL": influx.url,
                    "SINK_INFLUX_DB_NAME": db,
                    "SINK_INFLUX_MEASUREMENT_NAME": "bookings",
                },
                bigquery_keys(bigquery, table, "dagger.examples.BookingSummaryMessage"),
                {"SINK_TYPE": "log"},
            ],
        )
        data.pop("SINK_TYPE")
        output = _submit(cluster, dist, _work(tmp_path), "everything", data)
    assert f"descriptor sets {files.url('examples.desc')} loaded" in output

    def expected(i: int) -> dict:
        lat = -6.2 + (i % 1000) * 0.001
        area = ["jakarta", "bandung", "surabaya"][i % 3]
        return {
            "order_number": f"order-{i}",
            "area_code": codes[area],
            "geohash": pygeohash.encode(lat, 106.8, 7),
            "customer_name": f"name-c{i % 5}",
        }

    assert topic_size(broker.bootstrap, out) == total
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, total)]
    keys = ("order_number", "area_code", "geohash", "customer_name")
    assert sorted(tuple(r[k] for k in keys) for r in rows) == sorted(tuple(expected(i).values()) for i in range(total))
    points = influx.points(db, "bookings")
    assert sorted((p["order_number"], p["area_code"], p["customer_name"]) for p in points) == sorted(
        (e["order_number"], e["area_code"], e["customer_name"]) for e in map(expected, range(total))
    )
    assert sorted(r["order_number"] for r in bigquery_rows(bigquery, table)) == sorted(
        f"order-{i}" for i in range(total)
    )
    logged = [line for line in output.splitlines() if "order_number=order-" in line]  # the log sink, on the driver
    assert len(logged) == total and all(f"order_number=order-{i}," in output for i in range(total))


def test_the_executors_interpreter_path_is_made_to_resolve_on_the_driver(tmp_path):
    from dagger.errors import DaggerConfigError
    from dagger.session.spark import driver_side_python

    driver_side_python("./environment/bin/python", cwd=str(tmp_path))
    assert (tmp_path / "environment").resolve() == Path(sys.prefix).resolve()
    assert (tmp_path / "environment" / "bin" / "python").exists()
    driver_side_python("./environment/bin/python", cwd=str(tmp_path))  # there now: nothing to do
    driver_side_python("python3", cwd=str(tmp_path))  # a command on the PATH, or an absolute path: left alone
    driver_side_python(sys.executable, cwd=str(tmp_path))
    (tmp_path / "other").mkdir()
    with pytest.raises(DaggerConfigError, match="PYSPARK_PYTHON=other/bin/python does not exist on the driver"):
        driver_side_python("other/bin/python", cwd=str(tmp_path))  # a directory of that name is not replaced


@pytest.mark.chaos
@pytest.mark.long
def test_an_executor_killed_mid_run_is_replaced_and_nothing_is_lost(dist, cluster, broker, topic, bigquery, tmp_path):
    """kill -9 of an executor JVM (CoarseGrainedExecutorBackend under a worker) while the job writes: Spark re-runs
    its tasks elsewhere, the worker starts a new executor, the job goes on. Kafka gets every row (a re-run task's
    rows may repeat, at most one micro-batch), BigQuery every row exactly once."""
    import collections
    import json
    import signal
    import time

    from testing import proctree
    from testing.produce import consume_all, produce, topic_size
    from testing.samples import bookings, message_class
    from tests.conftest import START, bigquery_keys, bigquery_rows, bigquery_table, job, kafka_sink, kafka_stream

    total, per_batch = 3000, 100
    source, out, table = topic("cluster-kill", 2), topic("cluster-kill-out"), bigquery_table()
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START, step_seconds=0.01)), partitions=2)
    data = job(
        _Files(),
        [kafka_stream(broker, source)],
        "SELECT order_number, service_type, event_timestamp, amount_paid_by_cash FROM data_stream_0",
        METRIC_PROMETHEUS_PORT="0",
        SPARK_MAX_RECORDS_PER_TRIGGER=str(per_batch),
        SINKS=[
            kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
            bigquery_keys(bigquery, table, "dagger.examples.BookingSummaryMessage"),
        ],
    )
    data.pop("SINK_TYPE")
    work = _work(tmp_path)
    (work / "kill.json").write_text(json.dumps(data))
    command, env = _submit_command(cluster, dist, "kill.json")
    log = work / "driver.log"

    def wait_for(condition, what: str, timeout: float = 300) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while not condition():
            assert process.poll() is None, f"the job exited while waiting for {what}: {log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s: {log.read_text()[-4000:]}"
            time.sleep(0.5)

    with log.open("w") as sink:
        process = subprocess.Popen(command, cwd=work, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: topic_size(broker.bootstrap, out) >= 600, "output")
        executors = cluster.executor_pids()
        assert len(executors) == 2, executors
        os.kill(executors[0], signal.SIGKILL)
        wait_for(lambda: len(set(cluster.executor_pids()) - set(executors)) == 1, "replacement executor")
        wait_for(lambda: topic_size(broker.bootstrap, out) >= total, "complete output")
        time.sleep(2)  # the batch in flight, if any, finishes

        # stop the Python driver (spark-submit's child) as a SIGTERM to `dagger run` would: it ends the query at a
        # batch boundary and exits 0 (a SIGTERM to spark-submit's own JVM stops the driver's JVM under it: 143)
        def argv(pid: int) -> list[bytes]:
            return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")

        (driver,) = [
            p
            for p in proctree.tree(process.pid)
            if b"python" in argv(p)[0] and any(a.endswith(b"entry.py") for a in argv(p))
        ]
        os.kill(driver, signal.SIGTERM)
        assert process.wait(120) == 0, log.read_text()[-4000:]
    finally:
        if process.poll() is None:
            process.kill()
    output = log.read_text()
    assert "Lost executor" in output or "lost executor" in output.lower(), output[-4000:]
    summary = message_class("dagger.examples.BookingSummaryMessage")
    size = topic_size(broker.bootstrap, out)
    counts = collections.Counter(
        summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, expected=size)
    )
    assert set(counts) == {f"order-{i}" for i in range(total)}  # nothing lost
    assert sum(c - 1 for c in counts.values()) <= per_batch  # at-least-once: a re-run task's rows, at most a batch
    written = collections.Counter(r["order_number"] for r in bigquery_rows(bigquery, table))
    assert set(written) == set(counts) and set(written.values()) == {1}  # exactly once
