"""The ptars fast path against the python-protobuf reference, both directions, on a rich test proto."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dagger.errors import SinkError
from dagger.serde.decode import ProtoDecoder
from dagger.serde.encode import ProtoEncoder
from dagger.serde.reference import message_to_row
from dagger.serde.types import VALIDITY_COLUMN, table_schema
from testing.samples import example_descriptors, message_class

DESCRIPTORS = example_descriptors()
EVERYTHING = DESCRIPTORS.find_message("dagger.test.Everything")
Everything = message_class("dagger.test.Everything", DESCRIPTORS)
DECODER = ProtoDecoder(EVERYTHING, 23)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
text = st.text(max_size=8)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
f32 = st.floats(allow_nan=False, allow_infinity=False, width=32)
enum = st.integers(0, 5)  # 4 and 5 are unknown numbers
seconds = st.integers(-62135596800, 253402300799)


@st.composite
def inners(draw):
    return {"label": draw(text), "weight": draw(i32), "color": draw(enum), "values": draw(st.lists(i64, max_size=3))}


@st.composite
def messages(draw):
    m = Everything(
        f_double=draw(finite),
        f_float=draw(f32),
        f_int32=draw(i32),
        f_int64=draw(i64),
        f_uint32=draw(u32),
        f_uint64=draw(u64),
        f_sint32=draw(i32),
        f_sint64=draw(i64),
        f_fixed32=draw(u32),
        f_fixed64=draw(u64),
        f_sfixed32=draw(i32),
        f_sfixed64=draw(i64),
        f_bool=draw(st.booleans()),
        f_string=draw(text),
        f_bytes=draw(st.binary(max_size=8)),
        f_enum=draw(enum),
        f_strings=draw(st.lists(text, max_size=3)),
        f_enums=draw(st.lists(enum, max_size=3)),
    )
    if draw(st.booleans()):
        m.f_inner.CopyFrom(
            Everything.DESCRIPTOR.fields_by_name["f_inner"].message_type._concrete_class(**draw(inners()))
        )
    for item in draw(st.lists(inners(), max_size=2)):
        m.f_inners.add(**item)
    for k, v in draw(st.dictionaries(text, i64, max_size=3)).items():
        m.f_map[k] = v
    for k, v in draw(st.dictionaries(i32, inners(), max_size=2)).items():
        m.f_map_msg[k].CopyFrom(Everything.DESCRIPTOR.fields_by_name["f_inner"].message_type._concrete_class(**v))
    if draw(st.booleans()):
        m.event_timestamp.seconds = draw(seconds)
        m.event_timestamp.nanos = draw(st.integers(0, 999_999_999))
    if draw(st.booleans()):
        m.f_int64_wrapper.value = draw(i64)
    if draw(st.booleans()):
        m.f_string_wrapper.value = draw(text)
    if draw(st.booleans()):
        m.f_bool_wrapper.value = draw(st.booleans())
    if draw(st.booleans()):
        m.f_double_wrapper.value = draw(finite)
    if draw(st.booleans()):
        m.f_optional = draw(i32)
    choice = draw(st.sampled_from(["none", "text", "number"]))
    if choice == "text":
        m.choice_text = draw(text)
    elif choice == "number":
        m.choice_number = draw(i64)
    if draw(st.booleans()):
        m.f_duration.seconds = draw(st.integers(-(10**9), 10**9))
        m.f_duration.nanos = draw(st.integers(0, 999_999_999)) * (1 if m.f_duration.seconds >= 0 else -1)
    if draw(st.booleans()):
        m.f_tree.name = draw(text)
        m.f_tree.children.add(name=draw(text)).children.add(name="leaf")
    if draw(st.booleans()):
        m.f_struct.update({"n": draw(st.integers(-1000, 1000)), "s": draw(text), "l": [True, None]})
    for s in draw(st.lists(seconds, max_size=2)):
        m.f_timestamps.add(seconds=s)
    return m


def _normalise(value):
    if isinstance(value, float):
        return round(value, 3) if abs(value) < 1e300 else value
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_normalise(v) for v in value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=6))
def test_fast_decode_matches_reference(batch):
    result = DECODER.decode([m.SerializeToString() for m in batch])
    assert result.invalid == []
    assert result.batch.schema == DECODER.arrow_schema
    rows = result.batch.to_pylist()
    for message, row in zip(batch, rows, strict=True):
        expected = message_to_row(message)
        for name, value in expected.items():
            got = row[name]
            if name == "f_float":
                assert got == pytest.approx(value, rel=1e-6, abs=1e-30), name
            elif name == "f_map" or name == "f_map_msg":
                assert sorted(_normalise(got)) == sorted(_normalise(value)), name
            else:
                assert _normalise(got) == _normalise(value), name
        assert row[VALIDITY_COLUMN] is True
        expected_rowtime = expected["event_timestamp"] or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        assert row["rowtime"] == expected_rowtime


def _sorted_maps(row: dict) -> dict:
    return {k: sorted(v, key=repr) if k in ("f_map", "f_map_msg") else v for k, v in row.items()}


def _unknown_enum(m) -> bool:
    colors = [
        m.f_enum,
        *m.f_enums,
        m.f_inner.color,
        *(i.color for i in m.f_inners),
        *(v.color for v in m.f_map_msg.values()),
    ]
    return any(c > 3 for c in colors)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(messages(), min_size=1, max_size=6))
def test_encode_of_decoded_batch_round_trips(batch):
    # unknown enum numbers decode to their digits; writing them back is rejected like any unknown name
    assume(not any(_unknown_enum(m) for m in batch))
    encoder = ProtoEncoder(EVERYTHING)
    decoded = DECODER.decode([m.SerializeToString() for m in batch]).batch
    without_json = decoded.drop_columns(["f_struct"])  # JSON-typed Struct columns are read-only for now
    encoded = encoder.encode(without_json)
    for original, blob in zip(batch, encoded.to_pylist(), strict=True):
        back = Everything.FromString(blob)
        expected = Everything()
        expected.CopyFrom(original)
        expected.ClearField("f_struct")
        expected.f_tree.ClearField("children")  # recursive sub-messages are read as BINARY, not written back
        if not original.HasField("f_tree"):
            expected.ClearField("f_tree")
        # rowtime is microsecond precision: the Timestamp's sub-microsecond digits are gone
        for ts in [
            *([expected.event_timestamp] if expected.HasField("event_timestamp") else []),
            *expected.f_timestamps,
        ]:
            ts.nanos = ts.nanos // 1000 * 1000
        if expected.HasField("f_duration"):
            micros = expected.f_duration.seconds * 1_000_000 + int(expected.f_duration.nanos / 1000)
            expected.f_duration.seconds, expected.f_duration.nanos = (
                int(micros / 1_000_000),
                (micros - int(micros / 1_000_000) * 1_000_000) * 1000,
            )
        assert _sorted_maps(message_to_row(back)) == _sorted_maps(message_to_row(expected))


@pytest.mark.parametrize("as_arrow", [False, True], ids=["list", "arrow"])
def test_malformed_and_null_records_are_isolated_without_losing_the_rest(as_arrow):
    good = [Everything(f_int32=i, f_string=f"s{i}").SerializeToString() for i in range(5)]
    values = [good[0], b"\xff\xff\xff", good[1], None, good[2], b"\x08", good[3], good[4]]
    result = DECODER.decode(pa.array(values, pa.binary()) if as_arrow else values)
    assert result.invalid == [1, 3, 5]
    assert "not a valid dagger.test.Everything" in result.reasons[0]
    assert "tombstone" in result.reasons[1]
    rows = result.batch.to_pylist()
    assert [r[VALIDITY_COLUMN] for r in rows] == [True, False, True, False, True, False, True, True]
    assert [r["f_int32"] for r in rows if r[VALIDITY_COLUMN]] == [0, 1, 2, 3, 4]
    assert all(r["rowtime"] == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) for r in rows if not r[VALIDITY_COLUMN])


def test_an_arrow_array_with_a_malformed_record_but_no_tombstone_is_screened():
    good = [Everything(f_int32=i).SerializeToString() for i in range(3)]
    result = DECODER.decode(pa.array([good[0], b"\xff\xff\xff", good[1], good[2]], pa.binary()))
    assert result.invalid == [1]
    assert [r["f_int32"] for r in result.batch.to_pylist() if r[VALIDITY_COLUMN]] == [0, 1, 2]
    clean = DECODER.decode(pa.array(good, pa.binary()))
    assert clean.invalid == [] and clean.batch.column("f_int32").to_pylist() == [0, 1, 2]


def test_table_columns_follow_daggers_layout():
    schema = table_schema(DESCRIPTORS.find_message("dagger.examples.BookingLogMessage"))
    assert schema.names[-2:] == [VALIDITY_COLUMN, "rowtime"]
    assert schema.names[:3] == ["order_number", "service_type", "status"]
    types = {f.name: f.dataType.simpleString() for f in table_schema(EVERYTHING).fields}
    assert types["f_uint64"] == "decimal(20,0)" and types["f_uint32"] == "bigint" and types["f_fixed32"] == "bigint"
    assert types["event_timestamp"] == "timestamp" and types["f_duration"] == "bigint"
    assert types["f_struct"] == "string" and types["f_enum"] == "string"
    assert types["f_map"] == "map<string,bigint>" and types["f_int64_wrapper"] == "bigint"
    assert types["f_tree"] == "struct<name:string,children:array<binary>>"


def test_encoder_maps_by_name_and_reports_impossible_casts():
    summary = DESCRIPTORS.find_message("dagger.examples.BookingSummaryMessage")
    Summary = message_class("dagger.examples.BookingSummaryMessage", DESCRIPTORS)
    encoder = ProtoEncoder(summary)
    batch = pa.RecordBatch.from_pydict(
        {
            "order_number": ["a", None],
            "pickup.name": ["p", "q"],
            "pickup.latitude": [1.5, None],
            "not_a_field": [1, 2],
            "amount_paid_by_cash": pa.array([7, 8], pa.int32()),
            "service_type": ["GO_FOOD", None],
            "event_timestamp": [1700000000, None],
        }
    )
    first, second = (Summary.FromString(b) for b in encoder.encode(batch).to_pylist())
    assert first.order_number == "a" and first.pickup.name == "p" and first.pickup.latitude == 1.5
    assert first.amount_paid_by_cash == 7 and first.service_type == 3 and first.event_timestamp.seconds == 1700000000
    assert second.order_number == "" and not second.HasField("event_timestamp") and second.pickup.name == "q"
    for columns, message in [
        ({"service_type": ["TELEPORT"]}, "'service_type' holds 'TELEPORT', which is not a value of enum"),
        ({"pickup.floor": [1]}, "column 'pickup.floor' has no field 'floor' in message dagger.examples.Location"),
        ({"amount_paid_by_cash": ["lots"]}, "column 'amount_paid_by_cash' (STRING) cannot be written to field"),
        ({"item_tags": [3]}, "'item_tags' of dagger.examples.BookingSummaryMessage (ARRAY<STRING>)"),
    ]:
        with pytest.raises(SinkError) as info:
            encoder.encode(pa.RecordBatch.from_pydict(columns))
        assert message in str(info.value)
