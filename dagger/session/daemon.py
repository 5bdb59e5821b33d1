"""Spark's Python worker daemon with a job's heavy modules imported once, before it forks the workers.

Spark starts a ``pyspark.daemon`` per worker module and forks a Python worker from it for every task slot (and
again after a minute without tasks: Spark stops workers idle for 60 s). Each fresh worker then imports pyarrow,
pandas, protobuf, ptars, librdkafka's binding and the reader/sink code on its first task, ~0.5-1 s each with
several workers competing for the cores. Set as ``spark.python.daemon.module`` (the default of
:func:`dagger.session.spark.get_session`) for the UDF workers, and put in place of ``pyspark.daemon`` for the data
source workers (the sink runner, ``create_data_source``, ...) by the worker command of local masters
(:func:`dagger.session.spark.worker_python`), this module imports them in the daemon, so forked workers start with
them loaded (shared copy-on-write): the first micro-batch after a start, or after an idle minute, is seconds
faster. The imports start no Python threads (numpy's BLAS and pyarrow's jemalloc start native ones, which
survive a fork as they do under Spark's own daemon once a worker imports them).
"""

from __future__ import annotations

import gc
import importlib

PRELOAD = (
    "pyarrow",
    "pyarrow.compute",
    "numpy",
    "pandas",
    "google.protobuf.descriptor_pool",
    "google.protobuf.message_factory",
    "ptars",
    "confluent_kafka",
    "pyspark.worker",
    "pyspark.sql.datasource",
    "pyspark.sql.pandas.types",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.worker.commit_data_source_write",
    "pyspark.sql.worker.python_streaming_sink_runner",
    "dagger.catalog",  # every built-in source and sink
    "dagger.kafka.source",
    "dagger.kafka.source.reader",  # the stream reader, its partitions, spec, positions and event time
    "dagger.kafka.source.fetcher",
    "dagger.serde.decode",
    "dagger.serde.encode",
    "dagger.sinks.spark_writer",
    "dagger.kafka.sink",
    "dagger.kafka.producer",
)


def preload() -> None:
    """Import :data:`PRELOAD` (a module that fails to import is left for the worker to report), then freeze
    every object so far out of the garbage collector's reach.

    Spark's daemon runs ``gc.collect()`` in a reused worker after every task. Over the ~83,000 objects these
    imports create that is ~45 ms per task, and in a freshly forked worker it also writes to every page holding
    them, copying them out of the daemon's shared memory. Frozen (:func:`gc.freeze`, meant for pre-fork
    servers), they are skipped: a collection takes microseconds and leaves the shared pages alone.
    """

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the task that needs it raises the real error
            continue
    gc.collect()  # what is garbage now need not stay forever
    gc.freeze()


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
