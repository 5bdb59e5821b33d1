"""What the Longbow readers ship to executors from the job's keys, with no Spark and no Bigtable: the readers run
in ``mapInArrow`` against Bigtable (tests/integration/processors/test_longbow.py), so the function they hand it is
kept here and the spec it carries read, not run."""

from __future__ import annotations

import inspect
from typing import Any

from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from dagger.job import load_config
from dagger.longbow.classic import LongbowMetrics, classic_longbow
from dagger.longbow.plus import plus_reader
from dagger.longbow.schema import longbow_schema
from tests.unit.config.test_config import BASE


class Output:
    """Stands in for the SQL output's DataFrame: its schema, and the function Longbow hands ``mapInArrow``."""

    def __init__(self, columns: dict[str, Any]):
        self.schema = StructType([StructField(name, kind, True) for name, kind in columns.items()])
        self.columns = self.schema.names
        self.function: Any = None

    def mapInArrow(self, function: Any, schema: StructType) -> Output:  # noqa: N802 - Spark's name
        self.function = function
        return self

    def shipped_spec(self) -> dict[str, Any]:
        return inspect.getclosurevars(self.function).nonlocals["spec"]


CAPACITY = {**BASE, "PROCESSOR_LONGBOW_THREAD_CAPACITY": "7"}


def test_classic_longbow_reads_with_processor_longbow_thread_capacity_calls_in_flight():
    df = Output(
        {
            "longbow_key": StringType(),
            "longbow_data1": StringType(),
            "event_timestamp": TimestampType(),
            "rowtime": TimestampType(),
            "longbow_duration": StringType(),
        }
    )
    classic_longbow(df, longbow_schema(df.columns), load_config(data=CAPACITY), LongbowMetrics())
    assert df.shipped_spec()["capacity"] == 7


def test_the_longbow_plus_reader_reads_with_processor_longbow_thread_capacity_calls_in_flight():
    df = Output(
        {
            "longbow_read_key": StringType(),
            "event_timestamp": TimestampType(),
            "longbow_earliest": TimestampType(),
            "longbow_latest": TimestampType(),
            "bigtable_table_id": StringType(),
        }
    )
    plus_reader(df, longbow_schema(df.columns), load_config(data=CAPACITY), LongbowMetrics())
    assert df.shipped_spec()["capacity"] == 7
