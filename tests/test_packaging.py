"""What spark-submit ships to a cluster (`make dist`) holds a working job runtime."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
import zipfile

import pyspark
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_make_dist_builds_a_packed_environment_executors_can_run(tmp_path):
    result = subprocess.run(["make", "dist"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
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
