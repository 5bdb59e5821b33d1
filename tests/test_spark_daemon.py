"""Python workers fork from dagger's daemon, so a job's heavy modules are loaded before the first task."""

from __future__ import annotations

from dagger.spark_daemon import PRELOAD


def _loaded(batches):
    import sys

    import pyarrow as pa

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"missing": [",".join(m for m in PRELOAD if m not in sys.modules)]})


def test_workers_start_with_the_preloaded_modules(spark):
    assert spark.conf.get("spark.python.daemon.module") == "dagger.spark_daemon"
    rows = spark.range(2, numPartitions=2).mapInArrow(_loaded, "missing string").collect()
    assert [r.missing for r in rows] == ["", ""]


def _pyspark_origin(batches):
    import pyarrow as pa
    import pyspark

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"origin": [pyspark.__file__]})


def test_workers_import_pyspark_from_the_installed_package_not_the_zip(spark):
    rows = spark.range(2, numPartitions=2).mapInArrow(_pyspark_origin, "origin string").collect()
    assert rows and all(".zip" not in r.origin and r.origin.endswith("pyspark/__init__.py") for r in rows)


def test_the_worker_python_drops_only_the_redundant_zips(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pyspark

    from dagger.spark import worker_python

    monkeypatch.setenv("DAGGER_NATIVE_CACHE", str(tmp_path))
    wrapper = worker_python()
    assert wrapper is not None and os.access(wrapper, os.X_OK)
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = [str(lib / "pyspark.zip"), *map(str, lib.glob("py4j-*-src.zip"))]
    mine = tmp_path / "my path"  # entries with spaces survive
    mine.mkdir()
    (mine / "marker_module.py").write_text("VALUE = 7\n")
    env = dict(os.environ, PYTHONPATH=":".join([*zips, str(mine)]))
    probe = "import os, sys, pyspark, marker_module; print(pyspark.__file__, marker_module.VALUE, sys.executable)"
    out = subprocess.run([wrapper, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert ".zip" not in out[0] and out[1] == "7" and out[2] == sys.executable
    assert worker_python() == wrapper  # written once, reused


def test_local_masters_get_one_shuffle_partition_per_core():
    import os

    from dagger.spark import local_cores

    assert [local_cores(m) for m in ("local", "local[3]", "local[4, 2]", "local[*]")] == [1, 3, 4, os.cpu_count()]
