"""The InfluxDB sink its keys build: where it writes, as whom, when it sends and how it retries, with no InfluxDB
(writing to a server is tests/integration/influx/test_sink.py)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from dagger.catalog import build_sinks
from dagger.errors import DaggerConfigError
from dagger.influx.sink import _retry
from dagger.job import load_config
from tests.unit.config.test_config import BASE

INFLUX = {
    "SINK_TYPE": "influx",
    "SINK_INFLUX_URL": "http://127.0.0.1:8086",
    "SINK_INFLUX_MEASUREMENT_NAME": "bookings",
}


def _sink(**keys: str):  # noqa: ANN202
    (sink,) = build_sinks(load_config(data={**BASE, **INFLUX, **keys}), None)
    return sink


def test_the_v2_api_writes_to_sink_influx_bucket_which_then_needs_no_database():
    sink = _sink(SINK_INFLUX_API_VERSION="2", SINK_INFLUX_TOKEN="t", SINK_INFLUX_BUCKET="metrics-raw")
    assert sink.bucket == "metrics-raw"
    assert "bucket metrics-raw" in sink.describe()
    with pytest.raises(DaggerConfigError, match="SINK_INFLUX_DB_NAME is required when SINK_TYPE is 'influx'"):
        load_config(data={**BASE, **INFLUX, "SINK_INFLUX_API_VERSION": "2", "SINK_INFLUX_TOKEN": "t"})


def test_the_v1_api_logs_in_with_sink_influx_username_and_password():
    sink = _sink(SINK_INFLUX_DB_NAME="d", SINK_INFLUX_USERNAME="metrics-writer", SINK_INFLUX_PASSWORD="pw-91c3")
    assert (sink.username, sink.password) == ("metrics-writer", "pw-91c3")


def test_buffered_points_are_sent_once_older_than_sink_influx_flush_duration_ms():
    writer = _sink(SINK_INFLUX_DB_NAME="d", SINK_INFLUX_FLUSH_DURATION_MS="200").writer(partition_id=0, batch_id=0)
    posted: list[int] = []
    writer._post = lambda payload, points: posted.append(points)  # the HTTP write: counted, not made
    point = pa.RecordBatch.from_pydict({"tag_area": ["north"], "bookings": [3]})
    writer.write(point)
    time.sleep(0.25)
    writer.write(point)  # the first point is older than 200 ms: both go, far below the 5000 of a full request
    assert sum(posted) == 2 and writer.pending_points == 0


def test_the_second_retry_waits_sink_influx_retry_backoff_ms_and_each_next_one_twice_as_long():
    from urllib3.util.retry import RequestHistory

    retry = _retry(_sink(SINK_INFLUX_DB_NAME="d", SINK_INFLUX_RETRY_BACKOFF_MS="1500"))
    failed = RequestHistory("POST", "/write", None, 503, None)
    waits = [retry.new(history=(failed,) * n).get_backoff_time() for n in (1, 2, 3)]
    assert waits == [0, 1.5, 3.0]  # none before the first retry, as urllib3 does
