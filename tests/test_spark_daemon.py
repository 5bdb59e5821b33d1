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
