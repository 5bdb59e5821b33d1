"""The InfluxDB sink against a real InfluxDB 1.6 server (Debian's influxd), points read back via /query."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pyarrow as pa
import pytest

from dagger.catalog import build_sink
from dagger.config.model import SinkConfig
from dagger.errors import SinkError
from dagger.influx.line_protocol import line_protocol
from dagger.influx.sink import InfluxSink
from dagger.job.binding import bind_sink
from dagger.plugins.sink import SinkEnv
from testing.influx import V2WriteShim
from testing.produce import produce
from testing.samples import AREAS, SERVICES, bookings
from tests.conftest import START, job, kafka_stream, run_job

pytestmark = pytest.mark.integration


def _database(influx) -> str:
    name = f"db_{uuid.uuid4().hex[:8]}"
    influx.query(f'CREATE DATABASE "{name}"')
    return name


def _sink(influx, db: str, **keys) -> InfluxSink:
    entry = SinkConfig(
        SINK_TYPE="influx", SINK_INFLUX_URL=influx.url, SINK_INFLUX_DB_NAME=db, SINK_INFLUX_MEASUREMENT_NAME="m", **keys
    )
    sink = build_sink(bind_sink(entry), SinkEnv())
    assert isinstance(sink, InfluxSink)
    sink.label = "influx"
    return sink


def _write(sink: InfluxSink, batch: pa.RecordBatch, batch_id: int = 0) -> dict:
    writer = sink.writer(0, batch_id)
    writer.write(batch)
    return writer.flush()


def _ts(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


def test_window_job_writes_dagger_point_model(spark, broker, stencil, influx, topic, tmp_path):
    db = _database(influx)
    source = topic("influx-src")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(360, START, step_seconds=0.5)))
    sql = (
        "SELECT service_area_id AS tag_service_area_id, service_type AS label_service, count(1) AS booking_count, "
        "sum(total_distance_in_kms) AS distance, max(amount_paid_by_cash) > 2000 AS big, "
        "TUMBLE_START(rowtime, INTERVAL '1' MINUTE) AS window_start, "
        "TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp "
        "FROM data_stream_0 GROUP BY service_area_id, service_type, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
    )
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        SINK_TYPE="influx",
        SINK_INFLUX_URL=influx.url,
        SINK_INFLUX_DB_NAME=db,
        SINK_INFLUX_MEASUREMENT_NAME="bookings",
        SINK_INFLUX_BATCH_SIZE="4",
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    points = influx.points(db, "bookings")
    expected = []
    for minute in (0, 1):  # the watermark (max - 10 s) closes the windows ending 10:01 and 10:02
        for a, area in enumerate(AREAS):
            ids = [i for i in range(120 * minute, 120 * minute + 120) if i % 3 == a]
            expected.append(
                {
                    "time": int((START + dt.timedelta(minutes=minute + 1)).timestamp() * 1000),
                    "tag_service_area_id": area,  # tag_ prefix kept, as Dagger does
                    "service": SERVICES[a],  # label_ prefix stripped
                    "booking_count": len(ids),
                    "distance": float(sum(i % 7 for i in ids)),
                    "big": max(i * 10 for i in ids) > 2000,
                    "window_start": (START + dt.timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                }
            )
    key = lambda p: (p["time"], p["tag_service_area_id"])  # noqa: E731
    assert sorted(points, key=key) == sorted(expected, key=key)
    # tags are tags and fields are fields (InfluxDB's own view of the schema)
    tags = influx.query('SHOW TAG KEYS FROM "bookings"', db)["results"][0]["series"][0]["values"]
    assert sorted(t[0] for t in tags) == ["service", "tag_service_area_id"]
    fields = dict(
        tuple(f) for f in influx.query('SHOW FIELD KEYS FROM "bookings"', db)["results"][0]["series"][0]["values"]
    )
    assert fields == {"big": "boolean", "booking_count": "integer", "distance": "float", "window_start": "string"}
    assert manager.counters.sinks["influx"]["written"].value == 6


def test_rewriting_a_batch_overwrites_the_same_points(influx):
    db = _database(influx)
    sink = _sink(influx, db)
    batch = pa.RecordBatch.from_pydict(
        {"tag_k": ["a", "b"], "v": [1.5, 2.5], "window_timestamp": pa.array([_ts(2026, 11, 22, 10, 1)] * 2)}
    )
    assert _write(sink, batch)["written"] == 2
    assert _write(sink, batch)["written"] == 2  # a re-run micro-batch
    assert sorted(p["v"] for p in influx.points(db, "m")) == [1.5, 2.5]


def test_points_beyond_the_retention_policy_are_counted_and_tolerated(influx):
    db = _database(influx)
    influx.query(f'CREATE RETENTION POLICY "hour" ON "{db}" DURATION 1h REPLICATION 1')
    sink = _sink(influx, db, SINK_INFLUX_RETENTION_POLICY="hour")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    batch = pa.RecordBatch.from_pydict(
        {
            "tag_k": ["old", "new", "newer"],
            "v": [1, 2, 3],
            "window_timestamp": pa.array([_ts(2020, 1, 1), now, now + dt.timedelta(seconds=1)]),
        }
    )
    result = _write(sink, batch)
    assert result == {"written": 2, "dropped": 1, "dead_letters": 0}
    answer = influx.query('SELECT * FROM "hour"."m"', db)
    assert sorted(row[1] for row in answer["results"][0]["series"][0]["values"]) == ["new", "newer"]


def test_row_without_a_field_fails_clearly_or_goes_to_the_dead_letter_files(influx, tmp_path):
    from dagger.dead_letter import DeadLetterSpec

    db = _database(influx)
    batch = pa.RecordBatch.from_pydict(
        {"tag_k": ["ok", "empty"], "v": [1.0, None], "window_timestamp": pa.array([_ts(2026, 11, 22, 10, 1)] * 2)}
    )
    with pytest.raises(
        SinkError, match=r"sink 'influx' rejected a row of batch 3 \(INVALID_MESSAGE_ERROR\): row has no field"
    ):
        _write(_sink(influx, db), batch, batch_id=3)
    sink = _sink(influx, db)
    sink.dead_letter = DeadLetterSpec("job", path=str(tmp_path / "dlq"))
    assert _write(sink, batch, batch_id=4) == {"written": 1, "dropped": 0, "dead_letters": 1}
    [file] = list((tmp_path / "dlq").glob("sink-influx-4-0-*.jsonl"))
    letter = json.loads(file.read_text())
    assert letter["row"] == {"tag_k": "empty", "v": None, "window_timestamp": "2026-11-22T10:01:00Z"}
    assert letter["sink"] == "influx" and letter["error_type"] == "INVALID_MESSAGE_ERROR"
    assert letter["coordinates"] == {"batch_id": 4, "partition": 0}
    assert [p["tag_k"] for p in influx.points(db, "m")] == ["ok"]


def test_other_write_errors_fail_the_batch_with_the_servers_message(influx):
    db = _database(influx)
    sink = _sink(influx, db)
    stamp = pa.array([_ts(2026, 11, 22, 10, 1)])
    _write(sink, pa.RecordBatch.from_pydict({"v": [1], "window_timestamp": stamp}))
    with pytest.raises(SinkError, match="refused the write: .*field type conflict"):
        _write(sink, pa.RecordBatch.from_pydict({"v": ["text"], "window_timestamp": stamp}))


def test_unreachable_server_names_the_url(influx):
    sink = _sink(influx, "x", SINK_INFLUX_TIMEOUT_MS=2000, SINK_INFLUX_RETRIES=1)
    sink.url = "http://127.0.0.1:1"
    with pytest.raises(SinkError, match=r"InfluxDB at http://127.0.0.1:1 did not take the points after 1 retries"):
        _write(sink, pa.RecordBatch.from_pydict({"v": [1]}))


def test_v2_api_through_influxdb_client_with_token_and_db_rp_bucket(influx):
    db = _database(influx)
    with V2WriteShim(influx.url) as shim:
        sink = _sink(
            influx,
            db,
            SINK_INFLUX_API_VERSION="2",
            SINK_INFLUX_RETENTION_POLICY="autogen",
            SINK_INFLUX_TOKEN="s3cret",
            SINK_INFLUX_ORG="org",
        )
        sink.url = shim.url
        batch = pa.RecordBatch.from_pydict(
            {"label_city": ["x"], "n": [3], "window_timestamp": pa.array([_ts(2026, 11, 22, 10, 1, 30)])}
        )
        assert _write(sink, batch)["written"] == 1
        assert shim.tokens == ["Token s3cret"]
        assert sink.bucket == f"{db}/autogen"
    assert influx.points(db, "m") == [
        {"time": int(_ts(2026, 11, 22, 10, 1, 30).timestamp() * 1000), "city": "x", "n": 3}
    ]


def test_batch_size_and_flush_duration_decide_when_a_request_goes_out(influx):
    import time

    db = _database(influx)

    def batch(start: int, n: int) -> pa.RecordBatch:
        stamps = [_ts(2026, 11, 22, 10, 0, i) for i in range(start, start + n)]
        return pa.RecordBatch.from_pydict(
            {"tag_k": ["k"] * n, "v": list(range(start, start + n)), "window_timestamp": stamps}
        )

    with V2WriteShim(influx.url) as shim:
        sink = _sink(influx, db, SINK_INFLUX_API_VERSION="2", SINK_INFLUX_TOKEN="t", SINK_INFLUX_BATCH_SIZE="4")
        sink.url = shim.url
        assert _write(sink, batch(0, 10))["written"] == 10
        assert len(shim.tokens) == 3  # 4 + 4 + 2 points

        shim.tokens.clear()
        sink.batch_size, sink.flush_duration_ms = 1000, 50
        writer = sink.writer(0, 1)
        writer.write(batch(10, 2))
        assert len(shim.tokens) == 0  # buffered: neither size nor age reached
        time.sleep(0.1)
        writer.write(batch(12, 2))  # the buffer is older than 50 ms: sent now
        assert len(shim.tokens) == 1
        assert writer.flush()["written"] == 4
        assert len(shim.tokens) == 1  # nothing left for the end of the task
    assert sorted(p["v"] for p in influx.points(db, "m")) == list(range(14))


def test_line_protocol_escapes_and_leaves_out_what_influx_cannot_store():
    batch = pa.RecordBatch.from_pydict(
        {
            "tag_area": ["a b", None],
            "label_city": ["x,y=z", ""],
            "quote": ['say "hi"\\', "line\nbreak"],
            "nan": [float("nan"), 1.0],
            "when": pa.array([_ts(2026, 1, 2, 3, 4, 5), None]),
        }
    )
    lines, has_field = line_protocol(batch, "my measurement")
    assert lines.to_pylist() == [
        'my\\ measurement,tag_area=a\\ b,city=x\\,y\\=z quote="say \\"hi\\"\\\\",when="2026-01-02T03:04:05.000000Z"',
        'my\\ measurement quote="line\\nbreak",nan=1',
    ]
    assert has_field.to_pylist() == [True, True]


def test_check_refuses_outputs_influx_cannot_take():
    sink = InfluxSink("http://x", "m", "db")
    schema = pa.schema([("tag_a", pa.string()), ("window_timestamp", pa.string())])
    problems = sink.check(schema)
    assert any("window_timestamp is string" in p and "must be a TIMESTAMP" in p for p in problems)
    assert any("has no field column" in p for p in problems)
