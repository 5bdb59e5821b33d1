"""Dagger on Spark: SQL-first stream processing on Apache Spark, configured like Raystack Dagger."""

__version__ = "0.1.0"

from dagger.worker_logging import setup_if_worker  # noqa: E402

setup_if_worker()
