"""``INPUT_DATATYPE=JSON``: the table from the JSON Schema, records decoded columnar by Arrow's JSON reader, rowtime
from the named property, the invalid-record policies with exact accounting; window and join jobs over JSON give
the results the same records give as protobuf."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from google.protobuf.json_format import MessageToDict

from dagger.formats.json.decode import JsonDecoder
from dagger.formats.json.schema import JsonSchemaError, json_struct
from testing.produce import consume_all, produce
from testing.samples import bookings, message_class
from tests.conftest import START, dagger, job, json_sink, kafka_stream, run_job

Booking = message_class("dagger.examples.BookingLogMessage")

#: the bookings' fields as Dagger users describe them in INPUT_SCHEMA_JSON_SCHEMA
BOOKING_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "order_number": {"type": "string"},
        "service_type": {"type": "string"},
        "customer_id": {"type": "string"},
        "service_area_id": {"type": "string"},
        "amount_paid_by_cash": {"type": "integer"},
        "total_distance_in_kms": {"type": "number"},
        "event_timestamp": {"type": "string", "format": "date-time"},
        "driver_pickup_location": {"$ref": "#/definitions/Location"},
        "item_tags": {"type": "array", "items": {"type": "string"}},
    },
    "definitions": {
        "Location": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "latitude": {"type": "number"}, "longitude": {"type": "number"}},
        }
    },
}


def as_json(serialized: bytes) -> bytes:
    """A serialized booking as the JSON object a JSON producer would write (proto3 JSON writes int64 as a string;
    a JSON producer writes a number)."""
    record = MessageToDict(Booking.FromString(serialized), preserving_proto_field_name=True)
    record["amount_paid_by_cash"] = int(record.get("amount_paid_by_cash", 0))
    return json.dumps(record).encode()


def json_stream(broker, source: str, table: str = "data_stream_0", **extra) -> dict:
    stream = kafka_stream(
        broker,
        source,
        table=table,
        INPUT_DATATYPE="JSON",
        INPUT_SCHEMA_JSON_SCHEMA=json.dumps(BOOKING_SCHEMA),
        INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
        **extra,
    )
    for key in ("INPUT_SCHEMA_PROTO_CLASS", "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"):
        stream.pop(key)
    return stream


# -- the schema and the decoder, without Spark -----------------------------------------------------------------


def test_json_schema_maps_to_spark_types_as_flinks_converter_does():
    struct = json_struct(json.dumps(BOOKING_SCHEMA))
    assert struct.simpleString() == (
        "struct<order_number:string,service_type:string,customer_id:string,service_area_id:string,"
        "amount_paid_by_cash:bigint,total_distance_in_kms:double,event_timestamp:timestamp,"
        "driver_pickup_location:struct<name:string,latitude:double,longitude:double>,item_tags:array<string>>"
    )
    nullable = {
        "type": "object",
        "properties": {"n": {"type": ["null", "integer"]}, "d": {"type": "string", "format": "date"}},
    }
    assert json_struct(nullable).simpleString() == "struct<n:bigint,d:date>"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "object"}}},
            "INPUT_SCHEMA_JSON_SCHEMA.a is an object without properties",
        ),
        (
            {"type": "object", "properties": {"a": {"type": ["string", "integer"]}}},
            "INPUT_SCHEMA_JSON_SCHEMA.a has the types",
        ),
        (
            {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}},
            "INPUT_SCHEMA_JSON_SCHEMA.a uses oneOf",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/definitions/Nope"}}},
            "INPUT_SCHEMA_JSON_SCHEMA.a: reference #/definitions/Nope does not exist",
        ),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "INPUT_SCHEMA_JSON_SCHEMA.a is an array without"),
        (
            {"type": "object", "properties": {"a": {"type": "decimal"}}},
            "INPUT_SCHEMA_JSON_SCHEMA.a has type 'decimal'; accepted: string",
        ),
        ({"type": "array", "items": {"type": "string"}}, "INPUT_SCHEMA_JSON_SCHEMA: the records must be objects"),
        ("{not json", "INPUT_SCHEMA_JSON_SCHEMA is not JSON"),
    ],
)
def test_a_schema_without_one_column_type_is_refused_naming_the_property(schema, message):
    with pytest.raises(JsonSchemaError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        json_struct(schema if isinstance(schema, str) else json.dumps(schema))


def test_decoder_isolates_each_bad_record_and_says_why():
    decoder = JsonDecoder(json.dumps(BOOKING_SCHEMA), "event_timestamp")
    good = [as_json(v) for v in bookings(6, START)]
    values = [
        good[0],
        None,  # a tombstone
        b'{"order_number": 7, "event_timestamp": "2026-11-22T10:00:00Z"}',  # a number where a string belongs
        b'{"order_number": "x"}',  # no rowtime
        good[1],
        b"",  # empty
        b"[1, 2]",  # not an object
        good[2][:-1] + b' , "pretty":\n true}',  # valid JSON across lines (newlines between tokens)
        b'{"event_timestamp": "yesterday"}',  # not a date-time
        good[3] + good[4],  # two objects in one record
        b"{'single': quotes",  # malformed
        good[5],
    ]
    result = decoder.decode(pa.array(values, pa.binary()))
    assert result.invalid == [1, 2, 3, 5, 6, 8, 9, 10]
    reasons = dict(zip(result.invalid, result.reasons, strict=True))
    assert reasons[1] == "record value is null (tombstone)"
    assert reasons[2] == "not a record of the JSON Schema: order_number is a number where the schema says string"
    assert reasons[3] == "has no event_timestamp (the rowtime)"
    assert reasons[5] == reasons[9] == "not a record of the JSON Schema: not one JSON object"
    assert reasons[6] == "not a record of the JSON Schema: the record is an array where the schema says object"
    assert "couldn't parse:yesterday" in reasons[8]
    rows = result.batch.to_pylist()
    assert [r["order_number"] for i, r in enumerate(rows) if i not in result.invalid] == [
        "order-0",
        "order-1",
        "order-2",
        "order-5",
    ]
    assert rows[7]["rowtime"] == START + dt.timedelta(seconds=2)
    assert rows[0]["driver_pickup_location"] == {"name": "pickup-0", "latitude": -6.2, "longitude": 106.8}
    assert all(
        r["rowtime"] == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) for i, r in enumerate(rows) if i in result.invalid
    )


def test_rowtime_from_a_number_of_epoch_seconds():
    schema = {"type": "object", "properties": {"id": {"type": "string"}, "ts": {"type": "number"}}}
    rows = JsonDecoder(schema, "ts").decode([b'{"id": "a", "ts": 1700000000.25}']).batch.to_pylist()
    assert rows[0]["rowtime"] == dt.datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=dt.UTC)


# -- jobs --------------------------------------------------------------------------------------------------------

WINDOW_SQL = (
    "SELECT service_area_id, service_type, COUNT(1) AS booking_count, SUM(amount_paid_by_cash) AS cash, "
    "TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp FROM data_stream_0 "
    "GROUP BY service_area_id, service_type, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
)


def _window_rows(spark, broker, stencil, topic, tmp_path, stream_of, values: list[bytes]) -> tuple[list, object]:
    source, out = topic("json-in", partitions=2), topic("json-out")
    produce(broker.bootstrap, source, ((None, v) for v in values), partitions=2)
    data = job(stencil, [stream_of(source)], WINDOW_SQL, **json_sink(broker, out))
    manager, query = run_job(spark, data, tmp_path / f"cp-{source}")
    assert query.exception() is None
    rows = [
        json.loads(m.value())
        for m in consume_all(broker.bootstrap, out, expected=manager.counters.sinks["kafka"]["written"].value)
    ]
    return sorted(
        (r["service_area_id"], r["service_type"], r["window_timestamp"], r["booking_count"], r["cash"]) for r in rows
    ), query


def test_json_input_on_a_parquet_stream_is_refused(stencil, tmp_path):
    stream = {
        "INPUT_SCHEMA_TABLE": "data_stream_0",
        "INPUT_DATATYPE": "JSON",
        "INPUT_SCHEMA_JSON_SCHEMA": json.dumps(BOOKING_SCHEMA),
        "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME": "event_timestamp",
        "SOURCE_PARQUET_FILE_PATHS": [str(tmp_path)],
        "SOURCE_DETAILS": [{"SOURCE_NAME": "PARQUET_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
    done = dagger("validate", str(path))
    assert done.returncode == 2
    assert "INPUT_DATATYPE JSON of stream" in done.stderr and "is not one PARQUET_SOURCE reads" in done.stderr


# -- the JSON Kafka sink with SINK_KAFKA_JSON_SCHEMA ------------------------------------------------------------

OUT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "cash": {"type": "number"},
        "code": {"type": "integer"},
        "at": {"type": "string", "format": "date-time"},
    },
}


def test_generated_json_records_and_their_schema_decode_to_the_generated_values():
    from dagger.generate import RecordGenerator
    from testing.samples import example_descriptors

    descriptor = example_descriptors().find_message("dagger.examples.BookingLogMessage")
    as_proto = RecordGenerator(descriptor, seed=3, start=START)
    as_json = RecordGenerator(descriptor, seed=3, start=START, data_type="JSON")
    schema = as_json.json_schema()
    assert "metadata" not in schema["properties"]  # a map has no JSON Schema type: left out, ignored when read
    assert JsonDecoder(schema, "event_timestamp").spark_schema.fieldNames() == [
        *schema["properties"],
        "__internal_validation_field__",
        "rowtime",
    ]
    expected = as_proto.arrow(50)
    decoded = JsonDecoder(schema, "event_timestamp").decode(as_json.batch(50))
    assert decoded.invalid == []
    for name in ("order_number", "amount_paid_by_cash", "total_distance_in_kms", "item_tags"):
        assert decoded.batch.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert (
        decoded.batch.column("rowtime").to_pylist()
        == expected.column("event_timestamp").cast(pa.timestamp("us", tz="UTC")).to_pylist()
    )
