"""The source registry: the planner and the runner ask a stream's source, never test which one it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dagger.config import load_config
from dagger.errors import DaggerConfigError
from dagger.sinks import SINKS, register_sink
from dagger.sources import SOURCES, Source, SourceOptions, register_source, source_names
from tests.conftest import START, run_job

FINISHED: list[tuple[str, ...]] = []


class RangeSource(Source):
    """``RANGE_SOURCE``: ``SOURCE_PARQUET_FILE_PATHS[0]`` bookings numbered from 0, one a minute (a test source)."""

    names = ("RANGE_SOURCE",)
    source_type = "BOUNDED"

    def check(self, stream: Any) -> None:
        if not (stream.SOURCE_PARQUET_FILE_PATHS or [""])[0].isdigit():
            raise ValueError(f"stream '{stream.INPUT_SCHEMA_TABLE}': RANGE_SOURCE needs a count")

    def is_bounded(self, stream: Any, to_ms: int | None = None) -> bool:
        return True

    def location(self, stream: Any) -> str:
        return f"{stream.SOURCE_PARQUET_FILE_PATHS[0]} generated bookings"

    def input_description(self, spark: Any, stream: Any, from_ms: Any, to_ms: Any) -> dict[str, Any]:
        return {"table": stream.INPUT_SCHEMA_TABLE, "count": stream.SOURCE_PARQUET_FILE_PATHS[0]}

    def build(self, spark: Any, stream: Any, config: Any, descriptors: Any, options: SourceOptions) -> Any:
        from pyspark.sql import functions as F

        from dagger.serde.types import VALIDITY_COLUMN, table_schema

        schema = table_schema(descriptors.find_message(stream.INPUT_SCHEMA_PROTO_CLASS))
        given = {
            "order_number": F.concat(F.lit("order-"), F.col("id").cast("string")),
            VALIDITY_COLUMN: F.lit(True),
            config.FLINK_ROWTIME_ATTRIBUTE_NAME: F.timestamp_seconds(F.lit(int(START.timestamp())) + F.col("id") * 60),
        }
        count = int(stream.SOURCE_PARQUET_FILE_PATHS[0])
        return spark.range(count).select(
            *[given.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
        )

    def finish(self, progress: dict[str, Any], streams: list[Any], config: Any) -> None:
        FINISHED.append(tuple(s.INPUT_SCHEMA_TABLE for s in streams))


@pytest.fixture
def range_source():
    source = register_source(RangeSource())
    yield source
    SOURCES.pop("RANGE_SOURCE", None)


def stream(count: str = "7") -> dict:
    return {
        "INPUT_SCHEMA_TABLE": "generated",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "SOURCE_DETAILS": [{"SOURCE_NAME": "RANGE_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
        "SOURCE_PARQUET_FILE_PATHS": [count],
    }


def test_a_registered_source_is_a_source_name_with_its_own_checks(range_source):
    assert ("RANGE_SOURCE", "BOUNDED") in source_names()
    load_config(data={"FLINK_SQL_QUERY": "SELECT 1", "STREAMS": [stream()]})
    with pytest.raises(DaggerConfigError, match="RANGE_SOURCE needs a count"):
        load_config(data={"FLINK_SQL_QUERY": "SELECT 1", "STREAMS": [stream("many")]})
    bad = {**stream(), "SOURCE_DETAILS": [{"SOURCE_NAME": "RANGE_SOURCE", "SOURCE_TYPE": "UNBOUNDED"}]}
    with pytest.raises(DaggerConfigError, match=r"which no source supports; accepted: .*RANGE_SOURCE\+BOUNDED"):
        load_config(data={"FLINK_SQL_QUERY": "SELECT 1", "STREAMS": [bad]})


def test_a_registered_source_runs_a_bounded_job(range_source, spark, stencil, tmp_path):
    from tests.conftest import job
    from tests.test_sink_registry import JsonLinesSettings, JsonLinesSink

    register_sink("jsonl", JsonLinesSettings, JsonLinesSink.from_settings)  # rows land in a file we can read
    out = tmp_path / "rows.jsonl"
    try:
        data = job(
            stencil,
            [],
            "SELECT order_number, rowtime FROM generated WHERE order_number <> 'order-3'",
            SINK_TYPE="jsonl",
            SINK_JSONL_PATH=str(out),
        )
        data["STREAMS"] = json.dumps([stream()])
        manager, run = run_job(spark, data, tmp_path / "cp")
    finally:
        SINKS.pop("jsonl", None)
    assert run.exception() is None and manager.bounded
    rows = sorted((r["order_number"], r["rowtime"]) for r in map(json.loads, out.read_text().splitlines()))
    assert rows == [(f"order-{i}", f"2026-11-22 10:{i:02d}:00+00:00") for i in range(7) if i != 3]
    assert FINISHED == []  # a bounded run leaves its sources' live state alone
