"""The built-in sources, registered by the ``SOURCE_NAME`` users write in a stream's ``SOURCE_DETAILS``.

The contract and the registry are :mod:`dagger.plugins.source`; a built-in source is its module and its
registrations below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagger.kafka.source import KafkaSource
from dagger.parquet.source import ParquetSource
from dagger.plugins.source import register_source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

for _source in (KafkaSource, ParquetSource):
    for _name in _source.names:
        register_source(_name, _source.settings, _source)


def register_data_sources(spark: SparkSession) -> None:
    """Register the Python data sources (Kafka reader, fan-out sink writer) with a Spark session."""
    from dagger.kafka.source.memory import MemoryDataSource
    from dagger.kafka.source.reader import KafkaDataSource
    from dagger.sinks.spark_writer import SinkDataSource

    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(MemoryDataSource)
    spark.dataSource.register(SinkDataSource)
