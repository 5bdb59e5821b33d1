"""A Kafka sink captured for ``dagger test`` (dagger.sinks.capture): its own writer and encoder run, the records
are kept in files instead of produced, and read back in order."""

from __future__ import annotations

import pyarrow as pa

from dagger.catalog import build_sinks
from dagger.job import load_config
from dagger.kafka.sink.readback import read_back
from dagger.sinks.capture import read_spool
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE
from tests.unit.kafka.sink.test_sink import KAFKA


def test_a_captured_kafka_sink_keeps_what_its_encoder_wrote_per_batch_and_partition(tmp_path):
    (sink,) = build_sinks(load_config(data={**BASE, **KAFKA, "SINK_KAFKA_BROKERS": "nowhere:1"}), example_descriptors())
    sink.capture = str(tmp_path / "out")
    for batch_id, partition, numbers in [(1, 1, ["o-3"]), (0, 1, ["o-2"]), (0, 0, ["o-0", "o-1"])]:
        writer = sink.writer(partition, batch_id)
        writer.write(pa.record_batch({"order_number": numbers, "amount_paid_by_cash": [5] * len(numbers)}))
        assert writer.flush() == len(numbers)
    written = read_spool(sink.capture)
    assert [key for _, key in written] == [None] * 4
    records = read_back(sink.value, [value for value, _ in written])
    assert records == [{"order_number": f"o-{i}", "amount_paid_by_cash": "5"} for i in range(4)]


def test_nothing_captured_reads_as_no_records(tmp_path):
    assert read_spool(str(tmp_path / "never")) == []


def test_a_captured_influx_sink_keeps_its_lines_and_reads_them_back_as_points(tmp_path):
    import datetime as dt

    from dagger.testing.decoding import written
    from tests.unit.influx.test_sink import _sink

    sink = _sink(SINK_INFLUX_DB_NAME="d", SINK_INFLUX_URL="http://nowhere:1", DEAD_LETTER_PATH=str(tmp_path / "dl"))
    sink.capture = str(tmp_path / "points")
    writer = sink.writer(0, 0)
    when = dt.datetime(2026, 11, 22, 10, 1, tzinfo=dt.UTC)
    batch = pa.record_batch(
        {
            "tag_area": ["jak arta", "bandung"],
            "booking_count": pa.array([2, None], pa.int64()),
            "name": ['say "hi"', None],
            "window_timestamp": pa.array([when, when], pa.timestamp("us", "UTC")),
        }
    )
    writer.write(batch)
    result = writer.flush()
    assert result["written"] == 1 and result["dead_letters"] == 1  # bandung's row has no field: rejected
    assert written(sink) == [
        {
            "measurement": "bookings",
            "tags": {"tag_area": "jak arta"},
            "fields": {"booking_count": 2, "name": 'say "hi"'},
            "time": "2026-11-22T10:01:00Z",
        }
    ]


def test_a_captured_bigquery_sink_keeps_the_rows_its_encoder_made_and_appends_nothing(tmp_path):
    import datetime as dt

    from dagger.testing.decoding import written
    from tests.unit.bigquery.test_sink import _sink

    sink = _sink()
    sink.capture = str(tmp_path / "rows")
    sink.prepare()  # a captured sink contacts nothing (no dataset or table is created)
    writer = sink.writer(0, 0)
    when = dt.datetime(2026, 11, 22, 10, 0, 10, tzinfo=dt.UTC)
    batch = pa.record_batch(
        {
            "order_number": ["o-1", "o-2"],
            "amount_paid_by_cash": pa.array([30, 5], pa.int64()),
            "event_timestamp": pa.array([when, when], pa.timestamp("us", "UTC")),
        }
    )
    writer.write(batch)
    result = writer.flush()
    assert result == {"stream": None, "rows": 2, "dead_letters": 0}
    rows = written(sink)
    assert "service_type" not in rows[0]  # nulls are left out, as the log leaves them out
    assert [(r["order_number"], r["amount_paid_by_cash"], r["event_timestamp"]) for r in rows] == [
        ("o-1", 30, "2026-11-22T10:00:10Z"),
        ("o-2", 5, "2026-11-22T10:00:10Z"),
    ]
