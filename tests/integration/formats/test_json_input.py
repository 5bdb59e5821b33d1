"""The tests of tests/unit/serde/test_json_input.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json

import pytest

from testing.produce import consume_all, produce
from testing.samples import bookings, customers
from tests.conftest import START, dropped, job, json_sink, kafka_stream, run_job, validate_here
from tests.unit.formats.test_json_input import OUT_SCHEMA, WINDOW_SQL, _window_rows, as_json, json_stream


@pytest.mark.integration
def test_a_bad_json_record_under_fail_names_topic_partition_offset_and_the_property(
    spark, broker, stencil, topic, tmp_path
):
    source = topic("json-fail")
    values = [as_json(v) for v in bookings(5, START)]
    values.insert(2, b'{"order_number": "x", "amount_paid_by_cash": "lots", "event_timestamp": "2026-11-22T10:00:00Z"}')
    produce(broker.bootstrap, source, ((None, v) for v in values))
    _, query = run_job(
        spark, job(stencil, [json_stream(broker, source)], "SELECT order_number FROM data_stream_0"), tmp_path / "cp"
    )
    error = str(query.exception())
    assert f"record at topic {source} partition 0 offset 2 cannot be decoded" in error
    assert "amount_paid_by_cash is a string where the schema says number" in error


@pytest.mark.integration
def test_a_json_in_json_out_window_job_runs_with_no_descriptor_set_at_all(spark, broker, topic, tmp_path):
    """Nothing in it is protobuf: no SCHEMA_REGISTRY_STENCIL_URLS (Dagger's SCHEMA_REGISTRY_STENCIL_ENABLE is false
    by default, and such a job needs no Stencil). The windows are those of the same records as protobuf (above)."""
    source, out = topic("json-only-in", partitions=2), topic("json-only-out")
    records = bookings(360, START, step_seconds=0.5)
    produce(broker.bootstrap, source, ((None, as_json(v)) for v in records), partitions=2)
    data = job(None, [json_stream(broker, source)], WINDOW_SQL, **json_sink(broker, out))
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    done = validate_here(spark, str(path))
    assert done.returncode == 0, done.stderr
    assert "descriptors: none (no stream or sink of this job is protobuf)" in done.stdout
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    written = manager.counters.sinks["kafka"]["written"].value
    assert written == 6  # 3 groups x the 2 minutes the watermark closes
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=written)]
    assert sum(r["booking_count"] for r in rows) == 240
    assert {r["window_timestamp"] for r in rows} == {"2026-11-22T10:01:00.000000Z", "2026-11-22T10:02:00.000000Z"}


def test_a_protobuf_message_named_in_a_job_without_descriptor_sets_names_the_key_and_what_is_missing(
    spark, broker, tmp_path
):
    data = job(None, [json_stream(broker, "bookings")], WINDOW_SQL, **json_sink(broker, "out"))
    data.update(SINK_KAFKA_DATA_TYPE="PROTO", SINK_KAFKA_PROTO_MESSAGE="dagger.examples.BookingSummaryMessage")
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    done = validate_here(spark, str(path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "dagger: SINK_KAFKA_PROTO_MESSAGE names the protobuf message 'dagger.examples.BookingSummaryMessage', but "
        "SCHEMA_REGISTRY_STENCIL_URLS is empty: list the descriptor sets (http(s) URLs, file:// URLs or paths) "
        "that hold the stream and sink messages"
    )


@pytest.mark.integration
def test_interval_join_of_a_json_stream_with_a_protobuf_stream(spark, broker, stencil, topic, tmp_path):
    left, right, out = topic("jjoin-bookings"), topic("jjoin-customers"), topic("jjoin-out")
    produce(broker.bootstrap, left, ((None, as_json(v)) for v in bookings(20, START)))
    # only customers c0..c2 exist; bookings of c3 and c4 find no match
    produce(broker.bootstrap, right, ((None, v) for v in customers(3, START)))
    streams = [
        json_stream(broker, left, table="bookings"),
        kafka_stream(broker, right, table="customers", proto="dagger.examples.CustomerLogMessage", ts=4),
    ]
    sql = (
        "SELECT b.order_number, c.name, b.driver_pickup_location.name AS pickup, b.item_tags FROM bookings b "
        "JOIN customers c ON b.customer_id = c.customer_id AND b.rowtime BETWEEN c.rowtime AND c.rowtime + "
        "INTERVAL '5' MINUTE"
    )
    manager, query = run_job(spark, job(stencil, streams, sql, **json_sink(broker, out)), tmp_path / "cp")
    assert query.exception() is None
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=12)]
    assert manager.counters.sinks["kafka"]["written"].value == 12
    expected = sorted(
        (f"order-{i}", f"name-{i % 5}", f"pickup-{i % 4}", [f"tag{i % 2}", "all"]) for i in range(20) if i % 5 < 3
    )
    assert sorted((r["order_number"], r["name"], r["pickup"], r["item_tags"]) for r in rows) == expected


@pytest.mark.integration
def test_json_records_dead_lettered_with_their_reason(spark, broker, stencil, topic, tmp_path):
    source, out, dlq = topic("json-dl"), topic("json-dl-out"), topic("json-dl-dead")
    values = [as_json(v) for v in bookings(6, START)]
    values.insert(4, b'{"order_number": "no time"}')
    produce(broker.bootstrap, source, ((None, v) for v in values))
    stream = json_stream(
        broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="dead-letter", SOURCE_KAFKA_DEAD_LETTER_TOPIC=dlq
    )
    manager, query = run_job(
        spark,
        job(stencil, [stream], "SELECT order_number FROM data_stream_0", **json_sink(broker, out)),
        tmp_path / "cp",
    )
    assert query.exception() is None
    assert sorted(json.loads(m.value())["order_number"] for m in consume_all(broker.bootstrap, out, expected=6)) == [
        f"order-{i}" for i in range(6)
    ]
    dead = consume_all(broker.bootstrap, dlq, expected=1)
    assert [d.value() for d in dead] == [b'{"order_number": "no time"}']
    headers = {k: v.decode() for k, v in dead[0].headers()}
    assert headers["dagger.offset"] == "4" and headers["dagger.reason"] == "has no event_timestamp (the rowtime)"


@pytest.mark.integration
def test_json_sink_matches_properties_by_position_as_dagger_when_names_differ(spark, broker, stencil, topic, tmp_path):
    source, out = topic("jsink-pos-in"), topic("jsink-pos-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(3, START)))
    sql = "SELECT order_number, amount_paid_by_cash, 7 AS seven, rowtime FROM data_stream_0"
    sink = {**json_sink(broker, out), "SINK_KAFKA_JSON_SCHEMA": json.dumps(OUT_SCHEMA)}
    manager, query = run_job(spark, job(stencil, [kafka_stream(broker, source)], sql, **sink), tmp_path / "cp")
    assert query.exception() is None
    rows = sorted(
        (json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=3)), key=lambda r: r["id"]
    )
    assert rows[2] == {"id": "order-2", "cash": 20.0, "code": 7, "at": "2026-11-22T10:00:02.000000Z"}


def test_json_sink_that_cannot_be_shaped_is_refused_before_start(spark, broker, stencil, tmp_path):
    sql = "SELECT order_number, amount_paid_by_cash FROM data_stream_0"
    sink = {**json_sink(broker, "unused"), "SINK_KAFKA_JSON_SCHEMA": json.dumps(OUT_SCHEMA)}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(stencil, [kafka_stream(broker, "bookings")], sql, **sink)))
    done = validate_here(spark, str(path))
    assert done.returncode != 0
    assert (
        "SINK_KAFKA_JSON_SCHEMA: properties id, cash, code, at match no output column (order_number, "
        in done.stdout + done.stderr
    )
    bad = {**sink, "SINK_KAFKA_JSON_SCHEMA": json.dumps({"type": "object", "properties": {"x": {"type": "object"}}})}
    path.write_text(json.dumps(job(stencil, [kafka_stream(broker, "bookings")], sql, **bad)))
    done = validate_here(spark, str(path))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "SINK_KAFKA_JSON_SCHEMA.x is an object without properties; declare its properties (a free-form object has no column type)"
        )
    )


@pytest.mark.integration
def test_json_sink_writes_the_schemas_properties_by_name_typed_and_rejects_rows_that_do_not_convert(
    spark, broker, stencil, topic, tmp_path
):
    source, out = topic("jsink-in"), topic("jsink-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(6, START)))
    # columns in another order than the schema, one not in it (dropped), a string that becomes an integer
    sql = (
        "SELECT rowtime AS at, service_type, order_number AS id, amount_paid_by_cash AS cash, "
        "CASE WHEN amount_paid_by_cash = 30 THEN 'thirty' ELSE CAST(amount_paid_by_cash DIV 10 AS STRING) END AS code "
        "FROM data_stream_0"
    )
    sink = {**json_sink(broker, out), "SINK_KAFKA_JSON_SCHEMA": json.dumps(OUT_SCHEMA)}
    data = job(stencil, [kafka_stream(broker, source)], sql, DEAD_LETTER_PATH=str(tmp_path / "dlq"), **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    raw = [m.value() for m in consume_all(broker.bootstrap, out, expected=5)]
    assert manager.counters.sinks["kafka"]["written"].value == 5
    assert manager.counters.sinks["kafka"]["dead_letters"].value == 1
    first = min(raw, key=lambda r: json.loads(r)["id"])
    assert first == b'{"id":"order-0","cash":0.0,"code":0,"at":"2026-11-22T10:00:00.000000Z"}'
    assert sorted(json.loads(r)["code"] for r in raw) == [0, 1, 2, 4, 5]
    letters = [
        json.loads(line) for f in (tmp_path / "dlq").glob("sink-kafka-*.jsonl") for line in f.read_text().splitlines()
    ]
    assert [letter["row"]["id"] for letter in letters] == ["order-3"]
    assert "column code (string) cannot be written as code (int64) of SINK_KAFKA_JSON_SCHEMA" in letters[0]["reason"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"INPUT_SCHEMA_JSON_SCHEMA": None},
            "STREAMS[data_stream_0].INPUT_SCHEMA_JSON_SCHEMA is required with INPUT_DATATYPE JSON",
        ),
        pytest.param(
            {"INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME": "created"},
            "STREAMS[data_stream_0].INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME: the schema has no property 'created'",
            marks=pytest.mark.variant,
        ),
        (
            {"INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME": "order_number"},
            'property \'order_number\' is string; the rowtime must be a string with "format": "date-time"',
        ),
        (
            {"INPUT_SCHEMA_JSON_SCHEMA": json.dumps({"type": "object", "properties": {"a": {"type": "object"}}})},
            "STREAMS[data_stream_0].INPUT_SCHEMA_JSON_SCHEMA.a is an object without properties",
        ),
    ],
)
def test_json_stream_config_errors_exit_2_naming_the_key(spark, broker, stencil, tmp_path, change, message):
    stream = json_stream(broker, "anything")
    for key, value in change.items():
        if value is None:
            stream.pop(key)
        else:
            stream[key] = value
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
    done = validate_here(spark, str(path))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr.strip().splitlines()[-1]


def test_validate_describes_a_json_stream(spark, broker, stencil, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(stencil, [json_stream(broker, "bookings")], WINDOW_SQL)))
    done = validate_here(spark, str(path))
    assert done.returncode == 0, done.stderr
    assert "stream data_stream_0: KAFKA_CONSUMER topics /bookings/ as JSON, 11 columns" in done.stdout
    assert "cash: bigint" in done.stdout


@pytest.mark.integration
def test_window_over_json_gives_what_the_same_records_give_as_protobuf_and_counts_the_bad_ones(
    spark, broker, stencil, topic, tmp_path
):
    records = bookings(360, START, step_seconds=0.5)
    bad = [b"{not json", b'{"order_number": 1}', b'{"service_area_id": "jakarta"}', b"[]"]
    as_proto, _ = _window_rows(spark, broker, stencil, topic, tmp_path, lambda s: kafka_stream(broker, s), records)
    json_values = [as_json(v) for v in records]
    for i, value in enumerate(bad):  # spread over the partitions
        json_values.insert(50 * (i + 1), value)
    as_json_rows, query = _window_rows(
        spark,
        broker,
        stencil,
        topic,
        tmp_path,
        lambda s: json_stream(broker, s, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop"),
        json_values,
    )
    # 3 minutes of events, the watermark (latest - 10 s) closes the first two minutes: 3 groups x 2 windows
    assert len(as_proto) == 6
    assert as_json_rows == as_proto
    assert sum(r[3] for r in as_proto) == 240
    assert dropped(query) == len(bad)
