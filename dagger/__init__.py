"""Dagger on Spark: SQL-first stream processing on Apache Spark, configured like Raystack Dagger."""

__version__ = "0.1.0"


def _worker_logging() -> None:
    from dagger.worker_logging import in_spark_worker, setup

    if in_spark_worker():
        setup()


_worker_logging()
