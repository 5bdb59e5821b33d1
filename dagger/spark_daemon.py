"""Spark's Python worker daemon with a job's heavy modules imported once, before it forks the workers.

Spark starts one ``pyspark.daemon`` per executor and forks a Python worker from it for every task slot; each
fresh worker then imports pyarrow, protobuf, ptars, librdkafka's binding and the reader/sink code on its
first task, ~1-2 s each with two workers per task competing for the cores. Set as
``spark.python.daemon.module`` (the default of :func:`dagger.spark.get_session`), this module imports them in
the daemon, so forked workers start with them loaded (shared copy-on-write) and the first micro-batch after a
start is seconds faster. Importing starts no threads, so forking afterwards is safe.
"""

from __future__ import annotations

import importlib

PRELOAD = (
    "pyarrow",
    "pyarrow.compute",
    "numpy",
    "google.protobuf.descriptor_pool",
    "google.protobuf.message_factory",
    "ptars",
    "confluent_kafka",
    "pyspark.worker",
    "pyspark.sql.datasource",
    "pyspark.sql.pandas.types",
    "dagger.sources.kafka",
    "dagger.serde.decode",
    "dagger.serde.encode",
    "dagger.sinks.spark_writer",
    "dagger.sinks.kafka",
)


def preload() -> None:
    """Import :data:`PRELOAD`; a module that fails to import is left for the worker to report."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the task that needs it raises the real error
            continue


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
