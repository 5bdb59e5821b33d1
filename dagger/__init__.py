"""Dagger on Spark: SQL-first stream processing on Apache Spark, configured like Raystack Dagger."""

__version__ = "0.1.0"
