"""The source registry: the planner and the runner ask a stream's source, never test which one it is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from dagger.plugins.sink import SINKS, register_sink
from dagger.plugins.source import SOURCES, Source, SourceEnv, SourceSettings, register_source, source_names
from tests.conftest import START, run_job

FINISHED: list[tuple[str, ...]] = []


class RangeSettings(SourceSettings):
    """Generated bookings."""

    SOURCE_RANGE_COUNT: int = Field(description="How many bookings.")
    SOURCE_RANGE_STEP_SECONDS: int = Field(60, gt=0, description="Event time between two bookings.")


class RangeSource(Source):
    """``RANGE_SOURCE``: ``SOURCE_RANGE_COUNT`` bookings numbered from 0, one a minute (a test source)."""

    names = ("RANGE_SOURCE",)
    source_type = "BOUNDED"
    settings = RangeSettings

    def check(self, stream: Any) -> None:
        if stream.settings.SOURCE_RANGE_COUNT > 60:
            raise ValueError(f"stream '{stream.INPUT_SCHEMA_TABLE}': RANGE_SOURCE makes at most 60 bookings")

    def is_bounded(self, stream: Any, to_ms: int | None = None) -> bool:
        return True

    def location(self, stream: Any) -> str:
        return f"{stream.settings.SOURCE_RANGE_COUNT} generated bookings"

    def input_description(self, spark: Any, stream: Any, from_ms: Any, to_ms: Any) -> dict[str, Any]:
        return {"table": stream.INPUT_SCHEMA_TABLE, "count": stream.settings.SOURCE_RANGE_COUNT}

    def build(self, stream: Any, env: SourceEnv) -> Any:
        from pyspark.sql import functions as F

        spark, config, descriptors = env.spark, env.config, env.descriptors
        from dagger.serde.types import VALIDITY_COLUMN, table_schema

        schema = table_schema(descriptors.find_message(stream.format.INPUT_SCHEMA_PROTO_CLASS))
        step = stream.settings.SOURCE_RANGE_STEP_SECONDS
        given = {
            "order_number": F.concat(F.lit("order-"), F.col("id").cast("string")),
            VALIDITY_COLUMN: F.lit(True),
            config.FLINK_ROWTIME_ATTRIBUTE_NAME: F.timestamp_seconds(
                F.lit(int(START.timestamp())) + F.col("id") * step
            ),
        }
        count = stream.settings.SOURCE_RANGE_COUNT
        return spark.range(count).select(
            *[given.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
        )

    def finish(self, progress: dict[str, Any], streams: list[Any], config: Any) -> None:
        FINISHED.append(tuple(s.INPUT_SCHEMA_TABLE for s in streams))


@pytest.fixture
def range_source():
    source = register_source("RANGE_SOURCE", RangeSettings, RangeSource)
    yield source
    SOURCES.entries.pop("RANGE_SOURCE", None)


def stream(count: str = "7", **extra: str) -> dict:
    return {
        "INPUT_SCHEMA_TABLE": "generated",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "SOURCE_DETAILS": [{"SOURCE_NAME": "RANGE_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
        "SOURCE_RANGE_COUNT": count,
        **extra,
    }


def _load(*streams: dict):  # noqa: ANN202
    return load_config(data={"FLINK_SQL_QUERY": "SELECT 1", "STREAMS": list(streams)})


def test_a_registered_source_is_a_source_name_with_its_own_settings_and_checks(range_source):
    assert ("RANGE_SOURCE", "BOUNDED") in source_names()
    settings = _load(stream()).STREAMS[0].settings
    assert isinstance(settings, RangeSettings)
    assert (settings.SOURCE_RANGE_COUNT, settings.SOURCE_RANGE_STEP_SECONDS) == (7, 60)  # typed, with defaults
    with pytest.raises(DaggerConfigError, match="RANGE_SOURCE makes at most 60 bookings"):
        _load(stream("61"))
    # its keys are validated by its model: types, required keys, bounds, with the key named
    with pytest.raises(DaggerConfigError, match=r"STREAMS\[0\]\.SOURCE_RANGE_COUNT"):
        _load(stream("many"))
    with pytest.raises(DaggerConfigError, match=r"SOURCE_RANGE_STEP_SECONDS"):
        _load(stream(SOURCE_RANGE_STEP_SECONDS="0"))
    no_count = {k: v for k, v in stream().items() if k != "SOURCE_RANGE_COUNT"}
    with pytest.raises(DaggerConfigError, match=r"SOURCE_RANGE_COUNT"):
        _load(no_count)
    # a key no source knows gets the closest one; another source's key is accepted and ignored, as Dagger does
    with pytest.raises(DaggerConfigError, match="SOURCE_RANGE_CONT: unknown key; did you mean SOURCE_RANGE_COUNT"):
        _load(stream(SOURCE_RANGE_CONT="3"))
    assert _load(stream(SOURCE_KAFKA_TOPIC_NAMES="ignored")).STREAMS[0].settings.SOURCE_RANGE_COUNT == 7
    bad = {**stream(), "SOURCE_DETAILS": [{"SOURCE_NAME": "RANGE_SOURCE", "SOURCE_TYPE": "UNBOUNDED"}]}
    with pytest.raises(DaggerConfigError, match=r"which no source supports; accepted: .*RANGE_SOURCE\+BOUNDED"):
        _load(bad)


def test_a_source_settings_model_must_name_its_keys_source_():
    class Loose(SourceSettings):
        RANGE_COUNT: int = 1

    class LooseSource(RangeSource):
        names = ("LOOSE_SOURCE",)
        settings = Loose

    with pytest.raises(ValueError, match="settings keys must start with SOURCE_; got RANGE_COUNT"):
        register_source("LOOSE_SOURCE", Loose, LooseSource)
    assert "LOOSE_SOURCE" not in SOURCES.entries


def test_a_registered_source_runs_a_bounded_job(range_source, spark, stencil, tmp_path):
    from tests.conftest import job
    from tests.unit.plugins.test_sink_registry import JsonLinesSettings, JsonLinesSink

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
        SINKS.entries.pop("jsonl", None)
    assert run.exception() is None and manager.bounded
    rows = sorted((r["order_number"], r["rowtime"]) for r in map(json.loads, out.read_text().splitlines()))
    assert rows == [(f"order-{i}", f"2026-11-22 10:{i:02d}:00+00:00") for i in range(7) if i != 3]
    assert FINISHED == []  # a bounded run leaves its sources' live state alone
