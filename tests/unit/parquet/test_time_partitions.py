"""The read order of a Parquet stream's files (:func:`order_files`) as its keys set it; listing and reading the
files with Spark is tests/integration/parquet/test_source.py."""

from __future__ import annotations

import json

from dagger.job import load_config
from dagger.parquet.time_partitions import order_files, parse_date_ranges
from tests.unit.config.test_config import BASE

#: listed newest first
FILES = ["file:/d/dt=2026-11-23/a.parquet", "file:/d/dt=2026-11-22/b.parquet", "file:/d/dt=2026-11-21/c.parquet"]


def _settings(**keys: str):  # noqa: ANN202
    stream = {
        "INPUT_SCHEMA_TABLE": "bookings",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
        "SOURCE_DETAILS": [{"SOURCE_NAME": "PARQUET_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
        "SOURCE_PARQUET_FILE_PATHS": json.dumps(["file:/d"]),
        **keys,
    }
    return load_config(data={**BASE, "STREAMS": [stream]}).STREAMS[0].settings


def _names(settings, ranges: str | None = None) -> list[str]:  # noqa: ANN001
    ordered = order_files(FILES, settings.SOURCE_PARQUET_READ_ORDER_STRATEGY, parse_date_ranges(ranges), "here")
    return [path.rsplit("/", 1)[1] for _, path in ordered]


def test_earliest_index_first_reads_the_files_in_the_order_given_and_the_default_in_time_order():
    index_first = _settings(SOURCE_PARQUET_READ_ORDER_STRATEGY="EARLIEST_INDEX_FIRST")
    assert _names(index_first) == ["a.parquet", "b.parquet", "c.parquet"]
    assert _names(_settings()) == ["c.parquet", "b.parquet", "a.parquet"]  # EARLIEST_TIME_URL_FIRST
    # a date range still selects the files, in the order given
    assert _names(index_first, "2026-11-22T00:00:00Z,2026-11-23T23:59:59Z") == ["a.parquet", "b.parquet"]
