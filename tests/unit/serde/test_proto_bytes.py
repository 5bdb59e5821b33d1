"""Dagger's protobuf encoder in the JVM (``dagger/jvm/ProtoBytes.java``, used through ``dagger.serde.proto_jvm``)
against today's Python encoder (ptars, ``dagger.serde.encode.ProtoEncoder``): random messages of every message of
``descriptors/`` read and written back, the same records as today's encoder writes, columns mapped by name (dotted
ones into nested fields), and values a field cannot hold refused with the column named."""

from __future__ import annotations

import pyarrow as pa
import pytest
from google.protobuf import message_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dagger.serde.decode import ProtoDecoder
from dagger.serde.encode import ProtoEncoder
from dagger.serde.proto_jvm import proto_bytes, proto_record
from dagger.serde.reference import message_to_row
from dagger.serde.types import JSON_TYPES, VALIDITY_COLUMN
from testing.random_messages import messages
from testing.samples import example_descriptors

EXAMPLES = example_descriptors()
SET = EXAMPLES.serialized
MESSAGES = [
    "dagger.examples.BookingLogMessage",
    "dagger.examples.BookingSummaryMessage",
    "dagger.examples.BookingCountMessage",
    "dagger.test.Everything",
    "org.raystack.dagger.consumer.TestBookingLogMessage",
    "dagger.guide.SamplePaymentInfo",
]


def _writable(descriptor) -> list[str]:
    """The fields the encoders write: all but Struct/Value/ListValue ones (read as JSON text, not written)."""
    return [f.name for f in descriptor.fields if not (f.message_type and f.message_type.full_name in JSON_TYPES)]


def _open_enums_known(message) -> bool:
    """Whether every enum value of ``message`` (nested ones too) has a name: unknown numbers read as their digits,
    which no encoder writes back."""
    for field, value in message.ListFields():
        if field.enum_type is not None:
            values = value if field.is_repeated else [value]
            if any(field.enum_type.values_by_number.get(v) is None for v in values):
                return False
        elif field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                entries = value.values() if field.message_type.fields_by_name["value"].message_type else []
                if not all(_open_enums_known(e) for e in entries):
                    return False
                value_field = field.message_type.fields_by_name["value"]
                if value_field.enum_type is not None and any(
                    value_field.enum_type.values_by_number.get(v) is None for v in value.values()
                ):
                    return False
            elif field.is_repeated:
                if not all(_open_enums_known(m) for m in value):
                    return False
            elif not _open_enums_known(value):
                return False
    return True


def _micros(message) -> None:
    """``message`` as a TIMESTAMP or BIGINT of microseconds leaves it: sub-microsecond digits gone, everywhere."""
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        message.nanos = message.nanos // 1000 * 1000
        return
    if name == "google.protobuf.Duration":
        micros = message.seconds * 1_000_000 + int(message.nanos / 1000)
        message.seconds = int(micros / 1_000_000)
        message.nanos = (micros - message.seconds * 1_000_000) * 1000
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for entry in value.values():
                    _micros(entry)
        elif field.is_repeated:
            for item in value:
                _micros(item)
        else:
            _micros(value)


def _clear_recursive(message, path: tuple[str, ...]) -> None:
    """Clears the fields of ``message`` (nested ones too) whose type is already on ``path``: read as their bytes."""
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        if field.message_type.full_name in path:
            message.ClearField(field.name)
        elif field.is_repeated:
            for item in value:
                _clear_recursive(item, (*path, field.message_type.full_name))
        else:
            _clear_recursive(value, (*path, field.message_type.full_name))


def _normal(value):
    """NaN as a marker (NaN equals nothing), maps' pairs in one order."""
    import math

    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        return sorted(items, key=repr) if items and isinstance(value[0], tuple) else items
    if isinstance(value, tuple):
        return tuple(_normal(v) for v in value)
    return value


def jvm_encoded(spark, values: list[bytes], name: str, fields: list[str]) -> list[tuple[bytes | None, str | None]]:
    """``values`` read by the JVM decoder, the ``fields`` columns written back by the JVM encoder."""
    df = spark.createDataFrame(list(enumerate(values)), "i int, v binary")
    record = proto_record(spark, F.col("v"), SET, name)
    rows = df.select("i", *[record[f].alias(f) for f in fields])
    out = rows.select("i", proto_bytes(spark, rows.schema, SET, name, None, "SINK_KAFKA_PROTO_MESSAGE").alias("o"))
    return [
        (None if r["o"]["value"] is None else bytes(r["o"]["value"]), r["o"]["error"])
        for r in out.orderBy("i").collect()
    ]


@pytest.mark.parametrize("name", MESSAGES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_messages_are_written_back_as_read_and_as_todays_encoder_writes_them(spark, name, data):
    descriptor = EXAMPLES.find_message(name)
    cls = message_factory.GetMessageClass(descriptor)
    batch = data.draw(st.lists(messages(descriptor, unknown_enums=False), min_size=1, max_size=20))
    assert all(_open_enums_known(m) for m in batch)
    fields = _writable(descriptor)
    values = [m.SerializeToString() for m in batch]
    written = jvm_encoded(spark, values, name, fields)
    today = ProtoDecoder(descriptor, None).decode(values).batch
    columns = [c for c in today.schema.names if c in fields]
    python = ProtoEncoder(descriptor).encode(today.select(columns)).to_pylist()
    for message, (value, error), theirs in zip(batch, written, python, strict=True):
        assert error is None, error
        expected = cls()
        expected.CopyFrom(message)
        for f in descriptor.fields:
            if f.name not in fields:
                expected.ClearField(f.name)
        _micros(expected)
        assert _normal(message_to_row(cls.FromString(value))) == _normal(message_to_row(expected))
        if value != theirs:  # the same records, but for the order of a map's entries or recursive messages
            ours = cls.FromString(value)
            _clear_recursive(ours, (name,))  # written back by the JVM, not by today's encoder
            assert _normal(message_to_row(ours)) == _normal(message_to_row(cls.FromString(theirs)))


def _table(spark, rows: list[dict], ddl: str):
    return spark.createDataFrame(rows, ddl)


def test_columns_map_by_name_dotted_ones_fill_nested_fields_and_unknown_ones_are_ignored(spark):
    name = "dagger.examples.BookingSummaryMessage"
    df = spark.createDataFrame(
        [("o-1", "GO_RIDE", "p", 1.5, 7, "x")],
        "order_number string, service_type string, `pickup.name` string, `pickup.latitude` double, "
        "amount_paid_by_cash int, unknown string",
    )
    out = df.select(proto_bytes(spark, df.schema, SET, name, None, "K").alias("o")).first()["o"]
    assert out["error"] is None
    cls = message_factory.GetMessageClass(EXAMPLES.find_message(name))
    back = cls.FromString(bytes(out["value"]))
    assert back.order_number == "o-1" and back.pickup.name == "p" and back.pickup.latitude == 1.5
    assert back.amount_paid_by_cash == 7  # an INT column into an int64 field
    # and byte for byte as today's encoder
    batch = pa.RecordBatch.from_pylist(
        [{"order_number": "o-1", "service_type": "GO_RIDE", "pickup.name": "p", "pickup.latitude": 1.5,
          "amount_paid_by_cash": 7, "unknown": "x"}]
    )  # fmt: skip
    assert bytes(out["value"]) == ProtoEncoder(EXAMPLES.find_message(name)).encode(batch).to_pylist()[0]


def test_values_a_field_cannot_hold_are_the_rows_errors_naming_the_column(spark):
    name = "dagger.test.Everything"
    df = spark.createDataFrame(
        [(1, "RED", 5, 3), (2, "PURPLE", 5, 3), (3, "RED", -1, 3), (4, "RED", 5, 2**40)],
        "i int, f_enum string, f_uint32 bigint, f_int32 bigint",
    )
    out = df.select("i", proto_bytes(spark, df.schema, SET, name, b"\x00\x00\x00\x00\x07\x00", "K").alias("o"))
    rows = {r["i"]: r["o"] for r in out.collect()}
    assert rows[1]["error"] is None and bytes(rows[1]["value"]).startswith(b"\x00\x00\x00\x00\x07\x00")
    assert rows[2]["value"] is None
    assert "column 'f_enum' holds 'PURPLE', which is not a value of enum dagger.test.Color" in rows[2]["error"]
    assert "accepted: COLOR_UNSPECIFIED, RED, GREEN, BLUE" in rows[2]["error"]
    assert rows[3]["value"] is None and "column 'f_uint32' holds -1" in rows[3]["error"]
    assert rows[4]["value"] is None
    assert rows[4]["error"] == (
        "column 'f_int32' (BIGINT) holds 1099511627776, which field 'f_int32' of dagger.test.Everything (INT) "
        "cannot hold"
    )


def test_refusing_mode_writes_the_same_records_and_fails_the_query_on_a_row_it_cannot_write(spark):
    """The Kafka sink's form (one expression): the struct form's value for each row it can write; a row it cannot
    write (an enum name the enum lacks, found by the encoder; an overflow, found before it) fails the query with
    the sink's words around the row's error."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    name = "dagger.test.Everything"
    header = b"\x00\x00\x00\x00\x07\x00"
    refusal = ("sink 'kafka': a row cannot be written: ", ". Set a dead-letter output")
    good = spark.createDataFrame(
        [(1, "RED", 5, 3), (2, "GREEN", 0, -7)], "i int, f_enum string, f_uint32 bigint, f_int32 bigint"
    )
    both = good.select(
        "i",
        proto_bytes(spark, good.schema, SET, name, header, "K").alias("s"),
        proto_bytes(spark, good.schema, SET, name, header, "K", refusal=refusal).alias("v"),
    ).collect()
    assert len(both) == 2 and all(r["s"]["error"] is None and bytes(r["v"]) == bytes(r["s"]["value"]) for r in both)
    for row, why in [
        ((3, "PURPLE", 5, 3), "column 'f_enum' holds 'PURPLE', which is not a value of enum dagger.test.Color"),
        ((4, "RED", 5, 2**40), "column 'f_int32' (BIGINT) holds 1099511627776, which field 'f_int32' of"),
    ]:
        df = spark.createDataFrame([row], good.schema)
        with pytest.raises((PySparkException, Py4JJavaError)) as raised:
            df.select(proto_bytes(spark, df.schema, SET, name, header, "K", refusal=refusal)).collect()
        assert f"SinkError: sink 'kafka': a row cannot be written: {why}" in str(raised.value)
        assert ". Set a dead-letter output" in str(raised.value)


def test_nulls_leave_fields_unset_and_defaults_are_not_written(spark):
    name = "dagger.test.Everything"
    df = spark.createDataFrame([(None, 0, "", None)], "f_string string, f_int32 int, f_bytes string, f_optional int")
    out = df.select(proto_bytes(spark, df.schema, SET, name, None, "K").alias("o")).first()["o"]
    assert bytes(out["value"]) == b""
    df = spark.createDataFrame([(0,)], "f_optional int")  # proto3 optional: presence, so 0 is written
    out = df.select(proto_bytes(spark, df.schema, SET, name, None, "K").alias("o")).first()["o"]
    assert bytes(out["value"]) == b"\xe0\x01\x00"


def test_numbers_into_a_timestamp_are_epoch_seconds(spark):
    name = "dagger.examples.BookingSummaryMessage"
    df = spark.createDataFrame([(1700000000.25,)], "event_timestamp double")
    out = df.select(proto_bytes(spark, df.schema, SET, name, None, "K").alias("o")).first()["o"]
    back = message_factory.GetMessageClass(EXAMPLES.find_message(name)).FromString(bytes(out["value"]))
    assert (back.event_timestamp.seconds, back.event_timestamp.nanos) == (1700000000, 250_000_000)


def test_a_row_of_another_type_than_the_message_is_refused_at_planning(spark):
    from pyspark.errors import AnalysisException
    from pyspark.sql.classic.column import Column

    df = spark.createDataFrame([(1,)], "x int")
    column = Column(spark._jvm.dagger.proto.ProtoBytes.column(F.struct("x")._jc, SET, "dagger.test.Everything", None))
    with pytest.raises(AnalysisException, match="the rows to write as dagger.test.Everything are struct<x:int>"):
        df.select(column).schema  # noqa: B018 - analysing the plan is the point


def test_validity_column_is_not_a_message_field():
    assert VALIDITY_COLUMN not in _writable(EXAMPLES.find_message("dagger.test.Everything"))
