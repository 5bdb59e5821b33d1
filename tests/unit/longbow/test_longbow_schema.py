"""Longbow's detection and validation from the SQL output's columns, as Dagger decides them (§4.8)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

from dagger.errors import DaggerConfigError
from dagger.longbow.schema import LongbowKind, check_types, duration_ms, longbow_schema

CLASSIC = ["longbow_key", "longbow_data1", "longbow_data2", "event_timestamp", "rowtime", "longbow_duration"]


def test_no_column_matching_daggers_pattern_is_no_longbow():
    assert longbow_schema(["customer_id", "amount", "rowtime"]) is None
    # \b before "longbow" and after "key", as Java's Matcher.find: a word character on either side is no match
    assert longbow_schema(["my_longbow_key", "longbow_keys", "xlongbow_key"]) is None


def test_the_key_column_chooses_the_kind_in_daggers_order():
    classic = longbow_schema(CLASSIC)
    assert classic.kind is LongbowKind.CLASSIC and classic.range == "duration"
    assert classic.data_columns == ["longbow_data1", "longbow_data2"]
    writer = longbow_schema(["longbow_write_key", "rowtime", "event_timestamp", "amount"])
    assert writer.kind is LongbowKind.WRITER and writer.range is None
    reader = longbow_schema(["longbow_read_key", "event_timestamp", "longbow_earliest", "longbow_latest"])
    assert reader.kind is LongbowKind.READER and reader.range == "absolute"
    # longbow_key wins over the other two, as in Dagger's LongbowSchema.getType
    assert longbow_schema([*CLASSIC, "longbow_read_key"]).kind is LongbowKind.CLASSIC


def test_a_column_that_switches_longbow_on_but_names_no_kind_is_refused():
    with pytest.raises(DaggerConfigError, match=r"column 'longbow_customer_key' switches Longbow on .* longbow_key"):
        longbow_schema(["longbow_customer_key", "rowtime"])


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["longbow_key", "event_timestamp", "rowtime", "longbow_duration"], r"needs a column named \*longbow_data\*"),
        (
            ["longbow_key", "longbow_data1", "longbow_duration"],
            r"type longbow \(longbow_key\) needs a column named \*event_timestamp\* and one named \*rowtime\*",
        ),
        ([*CLASSIC, "proto_data"], r"type longbow \(longbow_key\) cannot have column 'proto_data'"),
        (["longbow_write_key", "event_timestamp"], r"type longbow_write .* needs a column named \*rowtime\*"),
        (
            ["longbow_write_key", "rowtime", "event_timestamp", "longbow_duration", "longbow_data_x"],
            r"cannot have column 'longbow_data_x' \(contains longbow_data\), 'longbow_duration'",
        ),
        (
            ["longbow_read_key", "rowtime", "longbow_duration"],
            r"longbow_read .* needs a column named \*event_timestamp",
        ),
        (
            ["longbow_read_key", "event_timestamp", "longbow_duration", "my_proto_data"],
            r"cannot have column 'my_proto_data' \(contains proto_data\)",
        ),
    ],
)
def test_missing_and_refused_columns_are_named(columns, message):
    with pytest.raises(DaggerConfigError, match=message):
        longbow_schema(columns)


@pytest.mark.parametrize(
    ("range_columns", "message"),
    [
        ([], r"needs its range: a longbow_duration column .* or both longbow_earliest and longbow_latest"),
        (["longbow_earliest"], r"has longbow_earliest without longbow_latest"),
        (["longbow_latest"], r"has longbow_latest without longbow_earliest"),
        (
            ["longbow_duration", "longbow_latest"],
            r"has both longbow_duration and longbow_latest; give the range one way",
        ),
    ],
)
def test_the_range_is_given_one_way_exactly(range_columns, message):
    base = ["longbow_key", "longbow_data1", "event_timestamp", "rowtime"]
    with pytest.raises(DaggerConfigError, match=message):
        longbow_schema(base + range_columns)
    reader = ["longbow_read_key", "event_timestamp"]
    with pytest.raises(DaggerConfigError, match=r"type longbow_read \(longbow_read_key\) .*" + message):
        longbow_schema(reader + range_columns)


def test_the_rowtime_column_is_the_jobs_rowtime_attribute():
    columns = ["longbow_key", "longbow_data1", "event_timestamp", "event_time", "longbow_duration"]
    assert longbow_schema(columns, rowtime="event_time").rowtime == "event_time"
    with pytest.raises(DaggerConfigError, match=r"\*rowtime\*"):
        longbow_schema(columns)


def _struct(**types) -> StructType:
    return StructType([StructField(name, kind) for name, kind in types.items()])


def test_column_types_longbow_cannot_store_are_refused_with_the_cast():
    good = _struct(
        longbow_key=StringType(),
        longbow_data1=StringType(),
        event_timestamp=TimestampType(),
        rowtime=TimestampType(),
        longbow_duration=StringType(),
    )
    schema = longbow_schema(good.names)
    check_types(schema, good)
    bad = _struct(**{**{f.name: f.dataType for f in good.fields}, "longbow_data1": DoubleType()})
    with pytest.raises(
        DaggerConfigError, match=r"'longbow_data1' is DOUBLE; Longbow needs STRING .*CAST\(\.\.\. AS STRING\)"
    ):
        check_types(schema, bad)
    key = _struct(**{**{f.name: f.dataType for f in good.fields}, "longbow_key": LongType()})
    with pytest.raises(DaggerConfigError, match=r"'longbow_key' is BIGINT"):
        check_types(schema, key)
    absolute = _struct(
        longbow_read_key=StringType(),
        event_timestamp=TimestampType(),
        longbow_earliest=LongType(),
        longbow_latest=StringType(),
    )
    with pytest.raises(
        DaggerConfigError, match=r"'longbow_latest' is STRING; Longbow needs BIGINT \(epoch milliseconds\)"
    ):
        check_types(longbow_schema(absolute.names), absolute)


def test_durations_are_minutes_hours_or_days():
    assert duration_ms("30m", "x") == 30 * 60_000
    assert duration_ms("12h", "x") == 12 * 3_600_000
    assert duration_ms("90d", "x") == 90 * 86_400_000
    for bad in ("90", "1w", "d", "-1d", "1.5d", ""):
        with pytest.raises(DaggerConfigError, match=r"PROCESSOR_LONGBOW_DOCUMENT_DURATION: .* is not a duration"):
            duration_ms(bad, "PROCESSOR_LONGBOW_DOCUMENT_DURATION")
