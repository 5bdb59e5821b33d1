"""Dagger's Avro decoder in the JVM (``dagger/jvm/AvroRows.java``, used by ``dagger.formats.avro.decode``) against
Spark's own ``from_avro`` over the same payloads: every Avro type and logical type Dagger maps, two writer schemas
resolved against one reader (a field removed, fields added with defaults, int → long and float → double), and
payloads that do not decode. The two must give the same values row for row."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid

import fastavro
import pytest
from pyspark.sql import functions as F

from dagger.formats.avro.decode import DECODED, PAYLOAD, SCHEMA_ID, _from_avro, jvm_rows
from dagger.formats.avro.types import avro_struct

LOCATION = {
    "type": "record",
    "name": "Loc",
    "fields": [{"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}],
}
WRITER = {
    "type": "record",
    "name": "R",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "f", "type": "float"},
        {"name": "d", "type": ["double", "null"]},
        {"name": "b", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {
            "name": "decf",
            "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 3},
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ltms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "ltus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "todu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "tags", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "loc", "type": ["null", LOCATION], "default": None},
        {"name": "locs", "type": {"type": "array", "items": "Loc"}},
        {
            "name": "either",
            "type": [
                "null",
                "string",
                "long",
                {"type": "record", "name": "Pt", "fields": [{"name": "x", "type": "int"}]},
            ],
        },
        {"name": "num", "type": ["int", "long"]},
        {"name": "real", "type": ["null", "float", "double"]},
        {"name": "gone", "type": "string"},
        {"name": "nothing", "type": "null"},
    ],
}
#: the reader: 'gone' removed, two fields added with defaults, 'small' promoted to long and 'f' to double
READER = {
    **WRITER,
    "fields": [
        *[
            {**f, "type": {"small": "long", "f": "double"}.get(f["name"], f["type"])}
            for f in WRITER["fields"]
            if f["name"] != "gone"
        ],
        {"name": "extra", "type": "string", "default": "dflt"},
        {"name": "extra2", "type": ["null", "int"], "default": None},
    ],
}
AT = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def _record(i: int) -> dict:
    return {
        "id": i,
        "small": i % 7 - 3,
        "name": None if i % 3 == 0 else f"n{i}é",
        "f": i / 3,
        "d": None if i % 4 == 0 else i * 1.5,
        "b": i % 2 == 0,
        "raw": bytes([i % 256, 1, 2]),
        "fx": b"abcd",
        "dec": decimal.Decimal(i) / 100 - 5,
        "decf": decimal.Decimal(i * 7) / 1000,
        "day": dt.date(2020, 1, 1) + dt.timedelta(days=i),
        "tms": AT + dt.timedelta(milliseconds=i * 1234),
        "tus": AT + dt.timedelta(microseconds=i * 1234567),
        "ltms": AT.replace(tzinfo=None) + dt.timedelta(milliseconds=i * 3),
        "ltus": AT.replace(tzinfo=None) + dt.timedelta(microseconds=i * 3),
        "tod": dt.time(1, 2, 3, i * 1000),
        "todu": dt.time(4, 5, 6, i),
        "u": str(uuid.UUID(int=i)),
        "color": ["RED", "GREEN", "BLUE"][i % 3],
        "tags": [None, "a", f"t{i}"][: i % 4],
        "attrs": {f"k{j}": j * i for j in range(i % 3)},
        "loc": None if i % 5 == 0 else {"lat": i * 0.1, "lon": -i * 0.2},
        "locs": [{"lat": 1.0, "lon": 2.0}] * (i % 3),
        "either": [None, f"s{i}", i, {"x": i}][i % 4],
        "num": i if i % 2 else 2**40 + i,
        "real": [None, 1.5, 2.25][i % 3],
        "gone": "x" * (i % 5),
        "nothing": None,
    }


def _datum(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


N = 120
#: payloads that are not datums of their id's schema, and an id no writer has
BAD = [(1, b"\x02"), (2, b""), (1, b"\xff" * 10), (3, _datum(WRITER, _record(1)))]


@pytest.fixture(scope="module")
def decoded(spark):
    rows = [(1, _datum(WRITER, _record(i))) for i in range(N)]
    rows += [(2, _datum(READER, {**_record(i), "extra": f"e{i}", "extra2": i})) for i in range(N)]
    df = spark.createDataFrame([*rows, *BAD], f"{SCHEMA_ID} int, {PAYLOAD} binary")
    writers = {1: json.dumps(WRITER), 2: json.dumps(READER)}
    expected = {**READER, "fields": [*READER["fields"], {"name": DECODED, "type": "boolean", "default": True}]}
    rows_class = jvm_rows(spark)
    assert rows_class is not None, "the session's class path lacks Dagger's JVM classes (make install builds them)"
    from pyspark.sql.classic.column import Column

    ours = Column(
        rows_class.column(
            F.col(SCHEMA_ID)._jc,
            F.col(PAYLOAD)._jc,
            0,
            json.dumps(expected),
            avro_struct(expected, "t").json(),
            writers,
        )
    )
    out = df.select(ours.alias("ours"), _from_avro(writers, expected).alias("spark"))
    return out.schema, out.collect()


def test_every_type_decodes_as_spark_decodes_it_resolved_against_the_reader(decoded):
    schema, rows = decoded
    assert len(rows) == 2 * N + len(BAD)
    good = rows[: 2 * N]
    assert all(r["ours"] is not None and r["ours"][DECODED] for r in good)
    assert [r["ours"] for r in good] == [r["spark"] for r in good]
    # the resolution happened: defaults for the old writer, the new writer's own values, promotions, 'gone' skipped
    assert {r["ours"]["extra"] for r in good[:N]} == {"dflt"} and good[N + 5]["ours"]["extra"] == "e5"
    assert good[N + 5]["ours"]["extra2"] == 5 and good[5]["ours"]["extra2"] is None
    assert good[4]["ours"]["small"] == 1 and "gone" not in schema["ours"].dataType.names
    assert good[7]["ours"]["either"].asDict(recursive=True) == {"member0": None, "member1": None, "member2": {"x": 7}}


def test_a_payload_that_does_not_decode_or_an_unknown_id_gives_null(decoded):
    _, rows = decoded
    bad = rows[2 * N :]
    assert [r["ours"] for r in bad] == [None] * len(BAD)
    # Spark's PERMISSIVE mode gives a row of nulls where Dagger's gives null: both read as 'not decoded'
    assert [r["spark"] is None or r["spark"][DECODED] is None for r in bad] == [True] * len(BAD)


def test_the_types_are_the_mapping_the_docs_publish(decoded):
    schema, _ = decoded
    ours = schema["ours"].dataType
    assert ours == avro_struct({**READER, "fields": [*READER["fields"], {"name": DECODED, "type": "boolean"}]}, "t")
    assert ours.simpleString().replace("false", "") == schema["spark"].dataType.simpleString().replace("false", "")


def test_the_fields_a_query_does_not_read_are_skipped_over_every_type(spark):
    """The job decodes only the fields its SQL reads: every other one of the writer's is skipped, of every type.
    The values keep Confluent's 5-byte header here, which both decoders start past."""
    from pyspark.sql.classic.column import Column

    kept = {"id", "color", "loc", "nothing"}  # around them: strings, unions, arrays, maps, fixed, records...
    reader = {**READER, "fields": [f for f in READER["fields"] if f["name"] in kept]}
    expected = {**reader, "fields": [*reader["fields"], {"name": DECODED, "type": "boolean", "default": True}]}
    writers = {1: json.dumps(WRITER)}
    df = spark.createDataFrame(
        [(1, _datum(WRITER, _record(i))) for i in range(N)], f"{SCHEMA_ID} int, {PAYLOAD} binary"
    )
    ours = Column(
        jvm_rows(spark).column(
            F.col(SCHEMA_ID)._jc,
            F.col(PAYLOAD)._jc,
            0,
            json.dumps(expected),
            avro_struct(expected, "t").json(),
            writers,
        )
    )
    rows = df.select(ours.alias("ours"), _from_avro(writers, expected).alias("spark")).collect()
    assert [r["ours"] for r in rows] == [r["spark"] for r in rows]
    assert [r["ours"]["id"] for r in rows] == list(range(N)) and rows[7]["ours"]["color"] == "GREEN"
