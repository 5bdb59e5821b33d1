"""Sources, registered by the ``SOURCE_NAME`` users write in a stream's ``SOURCE_DETAILS``.

The contract is :mod:`dagger.sources.base`, the registry :mod:`dagger.registry.sources`; a built-in source is its
module and one line below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagger.registry.sources import SOURCES, register_source, source_names, source_of
from dagger.sources.base import Source, SourceOptions
from dagger.sources.kafka_stream import KafkaSource
from dagger.sources.parquet import ParquetSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

register_source(KafkaSource())
register_source(ParquetSource())


def register_data_sources(spark: SparkSession) -> None:
    """Register the Python data sources (Kafka reader, fan-out sink writer) with a Spark session."""
    from dagger.sinks.spark_writer import SinkDataSource
    from dagger.sources.kafka import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(SinkDataSource)


__all__ = [
    "SOURCES",
    "Source",
    "SourceOptions",
    "register_data_sources",
    "register_source",
    "source_names",
    "source_of",
]
