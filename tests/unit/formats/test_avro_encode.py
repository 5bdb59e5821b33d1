"""The Avro Kafka sink's schema side (dagger.formats.avro.encode): the schema derived from output columns, whether
output fits a registered schema, and Confluent's header put in front of datums."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa

from dagger.formats.avro.encode import derived_schema, fit_problems

OUTPUT = pa.schema(
    [
        pa.field("order_number", pa.string(), nullable=False),
        pa.field("count", pa.int64()),
        pa.field("share", pa.float64()),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("local", pa.timestamp("us")),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("tags", pa.list_(pa.field("element", pa.string()))),
        pa.field("attrs", pa.map_(pa.string(), pa.int32())),
        pa.field("pickup", pa.struct([pa.field("lat", pa.float64()), pa.field("lon", pa.float64())])),
    ]
)


def test_the_derived_schema_is_a_record_a_registry_can_evolve():
    schema = json.loads(derived_schema(OUTPUT, "shop.Summary"))
    fastavro.parse_schema(schema)  # a valid Avro schema
    assert (schema["name"], schema["namespace"]) == ("Summary", "shop")
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["order_number"]["type"] == "string" and "default" not in fields["order_number"]
    assert fields["count"] == {"name": "count", "type": ["null", "long"], "default": None}
    assert fields["day"]["type"][1] == {"type": "int", "logicalType": "date"}
    assert fields["at"]["type"][1]["logicalType"] == "timestamp-micros"
    assert fields["local"]["type"][1]["logicalType"] == "local-timestamp-micros"
    assert fields["price"]["type"][1] == {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
    assert fields["tags"]["type"][1] == {"type": "array", "items": ["null", "string"]}
    assert fields["attrs"]["type"][1] == {"type": "map", "values": ["null", "int"]}
    assert (
        fields["pickup"]["type"][1]["type"] == "record" and fields["pickup"]["type"][1]["namespace"] == "shop.Summary"
    )
    assert fit_problems(json.dumps(schema), OUTPUT, "here") == []  # the output fits what it derived


def test_output_that_does_not_fit_a_registered_schema_is_named_column_by_column():
    registered = {
        "type": "record",
        "name": "Summary",
        "fields": [
            {"name": "order_number", "type": "string"},
            {"name": "count", "type": "int"},
            {"name": "share", "type": "double"},
            {"name": "missing", "type": ["null", "string"], "default": None},
        ],
    }
    output = pa.schema([f for f in OUTPUT if f.name in ("order_number", "count", "share", "day")])
    problems = fit_problems(json.dumps(registered), output, "subject 's'")
    assert problems == [
        "subject 's': column 'count' is bigint, the schema's field is int (cast it in the SQL)",
        "subject 's': the schema's field 'missing' has no output column of that name",
        "subject 's': output column(s) day are not in the schema",
    ]


def test_the_header_goes_in_front_of_each_datum_and_confluents_layout_reads_back():
    from dagger.serde.confluent_header import framed, header

    schema = fastavro.parse_schema({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})
    datums = []
    for i in (1, 300, -5):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, schema, {"id": i})
        datums.append(buffer.getvalue())
    out = framed(pa.array(datums, pa.binary()), header(70000)).to_pylist()
    assert [v[:5] for v in out] == [b"\0\x00\x01\x11\x70"] * 3
    assert [fastavro.schemaless_reader(io.BytesIO(v[5:]), schema, None)["id"] for v in out] == [1, 300, -5]
    # protobuf's message-index array, as confluent-kafka writes it (the table of docs/sources.md's research)
    assert header(42, (0,))[5:] == b"\x00" and header(42, (1, 0))[5:] == b"\x04\x02\x00"
    assert header(42, (0, 2))[5:] == b"\x04\x00\x04" and header(42, (70,))[5:] == b"\x02\x8c\x01"
