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


def test_make_dist_builds_a_packed_environment_executors_can_run(dist, tmp_path):
    with zipfile.ZipFile(ROOT / "dist" / "dagger_on_spark.zip") as archive:
        names = set(archive.namelist())
    assert {"dagger/cli.py", "dagger/sources/kafka.py", "udfs/__init__.py"} <= names
    with tarfile.open(ROOT / "dist" / "dagger_env.tar.gz") as archive:
        members = archive.getnames()
        assert not [m for m in members if "/site-packages/pyspark/" in m]  # the cluster's Spark provides it
        archive.extractall(tmp_path / "environment", filter="fully_trusted")
    # an executor runs the archive's Python with Spark's own pyspark.zip and py4j on PYTHONPATH
    spark_python = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    path = [os.path.join(spark_python, "pyspark.zip"), *glob.glob(os.path.join(spark_python, "py4j-*.zip"))]
    probe = "import dagger, dagger.sources.kafka, dagger.serde.decode, dagger.sinks.kafka, udfs; print(dagger.__file__)"
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


def test_the_readmes_cluster_commands_run_the_stateless_and_the_window_job_on_two_workers(
    dist, broker, topic, tmp_path
):
    """As the README tells cluster users: a standalone cluster (two worker JVMs), spark-submit in client mode with
    the packed environment through --archives and PYSPARK_PYTHON=./environment/bin/python, from a directory
    that has no such environment (the driver's data source planner used to fail on that path)."""
    import datetime as dt
    import json

    from dagger.devtools.cluster import StandaloneCluster, spark_home
    from dagger.devtools.produce import consume_all, produce, topic_size
    from dagger.devtools.samples import AREAS, bookings, message_class
    from tests.conftest import DESCRIPTORS, START, job, kafka_sink, kafka_stream

    class Files:
        def url(self, name: str) -> str:
            return str(DESCRIPTORS / name)

    total = 1000
    stateless_in, stateless_out = topic("cluster-in", 2), topic("cluster-out")
    produce(broker.bootstrap, stateless_in, ((None, v) for v in bookings(total, START)), partitions=2)
    window_in, window_out = topic("cluster-win", 2), topic("cluster-counts")
    produce(broker.bootstrap, window_in, ((None, v) for v in bookings(360, START, step_seconds=0.5)), partitions=2)
    jobs = {
        "stateless": job(
            Files(),
            [kafka_stream(broker, stateless_in)],
            "SELECT order_number FROM data_stream_0",
            METRIC_PROMETHEUS_PORT="0",
            **kafka_sink(broker, stateless_out, "dagger.examples.BookingSummaryMessage"),
        ),
        "window": job(
            Files(),
            [kafka_stream(broker, window_in)],
            "SELECT service_area_id, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS "
            "window_timestamp FROM data_stream_0 GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            METRIC_PROMETHEUS_PORT="0",
            **kafka_sink(broker, window_out, "dagger.examples.BookingCountMessage"),
        ),
    }
    work = tmp_path / "submit"
    work.mkdir()
    outputs = {}
    with StandaloneCluster(tmp_path / "cluster") as cluster:
        for name, data in jobs.items():
            (work / f"{name}.json").write_text(json.dumps(data))
            result = subprocess.run(
                [
                    os.path.join(os.path.dirname(sys.executable), "spark-submit"),
                    "--master",
                    cluster.url,
                    "--archives",
                    f"{dist / 'dagger_env.tar.gz'}#environment",
                    str(ROOT / "dagger" / "entry.py"),
                    f"{name}.json",
                    "--available-now",
                ],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=600,
                env={
                    **os.environ,
                    "SPARK_HOME": spark_home(),
                    "PYSPARK_DRIVER_PYTHON": sys.executable,
                    "PYSPARK_PYTHON": "./environment/bin/python",
                },
            )
            outputs[name] = result.stdout + result.stderr  # spark-submit passes the driver's stderr on as stdout
            assert result.returncode == 0, outputs[name][-4000:]
        tasks = cluster.task_counts()
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


def test_the_executors_interpreter_path_is_made_to_resolve_on_the_driver(tmp_path):
    from dagger.errors import DaggerConfigError
    from dagger.spark import driver_side_python

    driver_side_python("./environment/bin/python", cwd=str(tmp_path))
    assert (tmp_path / "environment").resolve() == Path(sys.prefix).resolve()
    assert (tmp_path / "environment" / "bin" / "python").exists()
    driver_side_python("./environment/bin/python", cwd=str(tmp_path))  # there now: nothing to do
    driver_side_python("python3", cwd=str(tmp_path))  # a command on the PATH, or an absolute path: left alone
    driver_side_python(sys.executable, cwd=str(tmp_path))
    (tmp_path / "other").mkdir()
    with pytest.raises(DaggerConfigError, match="PYSPARK_PYTHON=other/bin/python does not exist on the driver"):
        driver_side_python("other/bin/python", cwd=str(tmp_path))  # a directory of that name is not replaced
