"""Dagger's protobuf decoder in the JVM (``dagger/jvm/ProtoRows.java``, used by ``dagger.serde.proto_jvm``) against
today's Python decoder (ptars, ``dagger.serde.decode.ProtoDecoder``) and the python-protobuf reference
(``dagger.serde.reference``): the same Spark types for every message of ``descriptors/`` and a proto2 file, the
same values for random messages of each, protobuf's parsing rules on hand-made wire bytes, and damaged records
that make an error string, never a failed task."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import subprocess
import sys
import textwrap

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dagger.schema.projection import prune_message
from dagger.serde.decode import ProtoDecoder
from dagger.serde.proto_jvm import ERROR, proto_record, record_struct
from dagger.serde.reference import message_to_row
from dagger.serde.types import VALIDITY_COLUMN, message_struct
from testing.random_messages import messages
from testing.samples import example_descriptors

EXAMPLES = example_descriptors()
SET = EXAMPLES.serialized
OWN_FILES = [f for f in descriptor_pb2.FileDescriptorSet.FromString(SET).file if not f.name.startswith("google/")]
#: every message of descriptors/ (nested ones too) that a stream can read
MESSAGES = [f"{file.package}.{message.name}" for file in OWN_FILES for message in file.message_type]

PROTO2 = """
syntax = "proto2";
package legacy;
import "google/protobuf/timestamp.proto";

enum Level { LOW = 1; HIGH = 2; }

message Point {
  optional int32 x = 1 [default = 9];
  repeated int32 ys = 2 [packed = true];
  repeated sint64 zs = 3;
}

message Legacy {
  optional int32 count = 1 [default = 5];
  optional string label = 2 [default = "hi"];
  optional Level level = 3 [default = HIGH];
  required int64 id = 4;
  optional Point point = 5;
  repeated Point points = 6;
  map<string, Point> named = 7;
  optional bytes blob = 8 [default = "xy"];
  optional double ratio = 9 [default = 1.5];
  repeated Level levels = 10;
  optional google.protobuf.Timestamp at = 11;
  optional uint64 big = 12;
  optional group Extra = 13 { optional string note = 14; repeated int32 tally = 15; }
  optional fixed32 f32 = 16;
  optional sfixed64 sf64 = 17;
}
"""


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """The proto2 file compiled with its import into a descriptor set: ``(set bytes, pool)``."""
    out = tmp_path_factory.mktemp("proto2")
    (out / "legacy.proto").write_text(textwrap.dedent(PROTO2))
    desc = out / "legacy.desc"
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", "--include_imports", f"--descriptor_set_out={desc}",
         str(out / "legacy.proto")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = desc.read_bytes()
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        pool.Add(file)
    return data, pool


def jvm_rows(spark, values: list[bytes | None], message: str, fields=None, descriptor_set: bytes = SET, **kw):
    """The JVM's decoded struct of each value, as plain Python values (its error field included)."""
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, v binary")
    decoded = proto_record(spark, F.col("v"), descriptor_set, message, fields, **kw)
    rows = df.select("i", decoded.alias("r")).orderBy("i").collect()
    return [plain(r["r"].asDict(recursive=True)) for r in rows]


def plain(value):
    """Both sides' values in one form: maps as dicts, naive UTC datetimes, bytes, NaN as a marker."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def typed(value, dtype):
    """``value`` (a reference row's: maps as lists of pairs) in :func:`plain`'s form, guided by its Spark type."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if value is None:
        return None
    if isinstance(dtype, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        return {plain(k): typed(v, dtype.valueType) for k, v in pairs}
    if isinstance(dtype, ArrayType):
        return [typed(v, dtype.elementType) for v in value]
    if isinstance(dtype, StructType):
        return {f.name: typed(value[f.name], f.dataType) for f in dtype.fields}
    return plain(value)


def reference_row(message) -> dict:
    return typed(message_to_row(message), message_struct(message.DESCRIPTOR))


def python_rows(values: list[bytes], descriptor) -> list[dict]:
    """Today's decoder's record fields (the validity flag and rowtime left out)."""
    batch = ProtoDecoder(descriptor, None).decode(values).batch
    return [
        {k: plain(v) for k, v in row.items() if k not in (VALIDITY_COLUMN, "rowtime")}
        for row in batch.to_pylist(maps_as_pydicts="lossy")
    ]


def without_error(row: dict) -> dict:
    assert row[ERROR] is None, row[ERROR]
    return {k: v for k, v in row.items() if k != ERROR}


@pytest.mark.parametrize("name", MESSAGES)
def test_the_jvm_maps_every_message_of_descriptors_as_the_python_side(spark, name):
    descriptor = EXAMPLES.find_message(name)
    assert record_struct(spark, SET, name, None) == message_struct(descriptor)
    kept = [f.name for f in descriptor.fields][::2]
    pruned = prune_message(descriptor_pb2.FileDescriptorSet.FromString(SET), name, kept)
    pool = descriptor_pool.DescriptorPool()
    for file in pruned.file:
        pool.Add(file)
    assert record_struct(spark, SET, name, kept) == message_struct(pool.FindMessageTypeByName(name))


def test_the_jvm_maps_proto2_as_the_python_side(spark, legacy):
    data, pool = legacy
    assert record_struct(spark, data, "legacy.Legacy", None) == message_struct(
        pool.FindMessageTypeByName("legacy.Legacy")
    )


@pytest.mark.parametrize("name", MESSAGES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_messages_decode_as_todays_decoder_does(spark, name, data):
    descriptor = EXAMPLES.find_message(name)
    batch = data.draw(st.lists(messages(descriptor), min_size=1, max_size=25))
    values = [m.SerializeToString() for m in batch]
    got = [without_error(r) for r in jvm_rows(spark, values, name)]
    assert got == python_rows(values, descriptor)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_proto2_messages_decode_as_the_reference_does(spark, legacy, data):
    """proto2: unset fields with declared defaults are NULL (presence), groups, closed enums, packed and not."""
    raw, pool = legacy
    descriptor = pool.FindMessageTypeByName("legacy.Legacy")
    batch = data.draw(st.lists(messages(descriptor), min_size=1, max_size=20))
    for m in batch:
        m.id = m.id  # required: set
    values = [m.SerializeToString() for m in batch]
    got = [without_error(r) for r in jvm_rows(spark, values, "legacy.Legacy", descriptor_set=raw)]
    assert got == [reference_row(m) for m in batch]
    # today's decoder reads the same (no group: ptars' Arrow schema has no group fields, see below)
    assert [{k: v for k, v in r.items() if k != "extra"} for r in got] == [
        {k: v for k, v in r.items() if k != "extra"} for r in python_rows(values, descriptor)
    ]


@pytest.mark.parametrize("fields", [["order_number"], ["event_timestamp", "metadata", "driver_pickup_location"]])
def test_pruned_fields_are_skipped_as_unknown_fields(spark, fields):
    from testing.samples import bookings

    values = bookings(5, dt.datetime(2026, 11, 1, tzinfo=dt.UTC))
    name = "dagger.examples.BookingLogMessage"
    got = [without_error(r) for r in jvm_rows(spark, values, name, fields)]
    full = python_rows(values, EXAMPLES.find_message(name))
    assert got == [{f: row[f] for f in row if f in fields} for row in full]
    assert list(got[0]) == [f for f in full[0] if f in fields]  # declaration order


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len(number: int, body: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(body)) + body


def test_protobufs_parsing_rules_on_hand_made_bytes(spark):
    """Everything: 3 f_int32, 14 f_string, 17 f_inner (Inner: 1 label, 2 weight, 4 values), 21 f_map<string,int64>,
    22 f_map_msg<int32, Inner>, 23 event_timestamp, 24 f_int64_wrapper."""
    name = "dagger.test.Everything"
    cases = {
        "last scalar wins": _tag(3, 0) + _varint(1) + _tag(3, 0) + _varint(2),
        "messages merge": _len(17, _tag(1, 2) + b"\x01a" + _tag(4, 0) + b"\x05")
        + _len(17, _tag(2, 0) + b"\x07" + _tag(4, 0) + b"\x06"),
        "packed and unpacked": _len(17, _tag(4, 0) + b"\x01" + _len(4, b"\x02\x03") + _tag(4, 0) + b"\x04"),
        "map: last of a key wins where it first stood": _len(21, _len(1, b"k") + _tag(2, 0) + b"\x01")
        + _len(21, _len(1, b"j") + _tag(2, 0) + b"\x02")
        + _len(21, _len(1, b"k") + _tag(2, 0) + b"\x03"),
        "map: a missing value is the default": _len(22, _tag(1, 0) + b"\x05"),
        "unknown fields of every wire type": _tag(99, 0)
        + b"\x96\x01"
        + _tag(98, 1)
        + b"\x00" * 8
        + _tag(97, 5)
        + b"\x00" * 4
        + _len(96, b"xyz")
        + _tag(95, 3)
        + _tag(1, 0)
        + b"\x01"
        + _tag(95, 4)
        + _tag(3, 0)
        + b"\x2a",
        "a known number of another wire type is unknown": _tag(3, 2) + b"\x01x" + _tag(14, 0) + b"\x01",
        "wrapper present but empty": _len(24, b""),
        "timestamp merged": _len(23, _tag(1, 0) + b"\x0a") + _len(23, _tag(2, 0) + _varint(5000)),
    }
    values = list(cases.values())
    got = jvm_rows(spark, values, name)
    reference = [reference_row(EXAMPLES_CLASS.FromString(v)) for v in values]
    for case, row, expected in zip(cases, got, reference, strict=True):
        assert row[ERROR] is None, case
        assert {k: v for k, v in row.items() if k != ERROR} == expected, case
    assert got[3]["f_map"] == {"k": 3, "j": 2}
    df = spark.createDataFrame([(values[3],)], "v binary")
    record = proto_record(spark, F.col("v"), SET, name)
    assert df.select(F.map_keys(record["f_map"])).first()[0] == ["k", "j"]  # where "k" first stood
    assert got[4]["f_map_msg"] == {5: {"label": "", "weight": 0, "color": "COLOR_UNSPECIFIED", "values": []}}
    assert got[7]["f_int64_wrapper"] == 0
    assert got[8]["event_timestamp"] == dt.datetime(1970, 1, 1, 0, 0, 10, 5)


EXAMPLES_CLASS = message_factory.GetMessageClass(EXAMPLES.find_message("dagger.test.Everything"))


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (_tag(3, 0) + b"\xff", "the record ends inside a varint"),
        (_tag(3, 0) + b"\xff" * 11, "a varint longer than 10 bytes"),
        (_len(14, b"abc")[:-1], "runs past the end"),
        (_len(14, b"\xff\xfe"), "is not UTF-8"),
        (_tag(3, 7) + b"\x01", "wire type 7"),
        (_tag(0, 0) + b"\x01", "field number 0"),
        (_tag(5, 4), "an end-group tag (field 5) without its group"),
        (_tag(95, 3) + _tag(1, 0) + b"\x01", "without its end-group tag"),
        (_tag(95, 3) * 150, "deeper than 100"),
        (_len(33, _len(1, _len(1, b"k") + _len(2, _tag(2, 1) + b"\x00" * 6 + b"\xf8\x7f"))), "NaN"),
        (None, "record value is null (tombstone)"),
    ],
)
def test_damaged_records_make_an_error_string_naming_what_is_wrong(spark, value, reason):
    (row,) = jvm_rows(spark, [value], "dagger.test.Everything")
    assert row[ERROR] is not None and reason in row[ERROR], row[ERROR]
    assert all(v is None for k, v in row.items() if k != ERROR)


def test_deeply_nested_json_values_are_refused_not_a_stack_overflow(spark):
    value = b"\x08\x00"  # Value{null_value}
    for _ in range(150):  # Value{list_value: ListValue{values: [value]}}
        value = _len(6, _len(1, value))
    record = _len(33, _len(1, _len(1, b"k") + _len(2, value)))
    (row,) = jvm_rows(spark, [record], "dagger.test.Everything")
    assert "nested deeper than 100" in row[ERROR]


def _damaged(data, batch) -> list[bytes]:
    """Each message serialized, then up to three bit flips, cuts and splices."""
    values = []
    for m in batch:
        raw = bytearray(m.SerializeToString())
        for _ in range(data.draw(st.integers(0, 3))):
            if not raw:
                break
            at = data.draw(st.integers(0, len(raw) - 1))
            action = data.draw(st.sampled_from(["flip", "cut", "splice"]))
            if action == "flip":
                raw[at] ^= 1 << data.draw(st.integers(0, 7))
            elif action == "cut":
                raw = raw[:at]
            else:
                raw = raw[:at] + data.draw(st.binary(min_size=1, max_size=4)) + raw[at:]
        values.append(bytes(raw))
    return values


def _in_range(column):
    """Timestamps Python's datetime can hold (damaged records make any)."""
    low, high = F.lit("0002-01-01").cast("timestamp"), F.lit("9999-01-01").cast("timestamp")
    return column.isNull() | column.between(low, high)


def _decoded(spark, values: list[bytes]) -> dict[int, dict]:
    """Position → the JVM's row, for the rows whose timestamps Python can hold."""
    df = spark.createDataFrame(list(enumerate(values)), "i int, v binary")
    rows = df.select("i", proto_record(spark, F.col("v"), SET, "dagger.test.Everything").alias("r"))
    rows = rows.where(_in_range(F.col("r.event_timestamp")) & F.forall("r.f_timestamps", _in_range))
    return {r["i"]: plain(r["r"].asDict(recursive=True)) for r in rows.collect()}


TREE = message_factory.GetMessageClass(EXAMPLES.find_message("dagger.test.Tree"))


def _trees_parsed(row: dict) -> dict:
    """A row with its recursive messages (kept as their bytes on the wire) parsed, so that two encodings of one
    message compare equal."""
    tree = row.get("f_tree")
    if tree is None:
        return row
    children = [reference_row(TREE.FromString(c)) for c in tree["children"]]
    return {**row, "f_tree": {**tree, "children": children}}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_damaged_random_messages_never_fail_a_task_and_read_as_protobuf_reads_them(spark, data):
    """Bit flips, cuts and splices of valid records (non-canonical bytes: fields repeated, merged, out of order,
    unknown). The JVM reads a record exactly when python-protobuf (upb) parses it; it reads it as protobuf-java,
    the parser Dagger reads records with, does (the same row as for protobuf-java's own serialization of it: merges,
    last values, oneofs); and that serialization reads as today's decoder reads it."""
    batch = data.draw(st.lists(messages(EXAMPLES.find_message("dagger.test.Everything")), min_size=1, max_size=12))
    values = _damaged(data, batch)
    got = _decoded(spark, values)
    canonical = {}
    for i, value in enumerate(values):
        if i not in got:
            continue
        try:
            EXAMPLES_CLASS.FromString(value)
        except DecodeError:
            assert got[i][ERROR] is not None, value
            continue
        assert got[i][ERROR] is None, (value, got[i][ERROR])
        again = spark._jvm.dagger.proto.ProtoRows.reserialized(SET, "dagger.test.Everything", value)
        assert again is not None, value  # protobuf-java reads what upb reads
        canonical[i] = bytes(again)
    pairs = list(canonical.items())  # (position in values, protobuf-java's serialization)
    read_again = _decoded(spark, [again for _, again in pairs])
    for k, (i, _) in enumerate(pairs):
        if k in read_again:
            assert _trees_parsed(got[i]) == _trees_parsed(read_again[k]), values[i]
    today = ProtoDecoder(EXAMPLES.find_message("dagger.test.Everything"), None)
    for k, (_, value) in enumerate(pairs):
        if k not in read_again:
            continue
        row = read_again[k]
        try:
            result = today.decode([value])
            expected = result.batch.to_pylist(maps_as_pydicts="lossy")[0]
        except BaseException:  # noqa: BLE001 - today's decoder panics on some records (a map entry without its value)
            continue
        if result.invalid:
            continue
        # a Struct's entries that hold unknown fields are entries to protobuf-java, unknown bytes to upb (which
        # today's decoder reads Struct fields with)
        keys = [k for k in row if k not in (ERROR, "f_struct")]
        assert {k: row[k] for k in keys} == {k: plain(expected[k]) for k in keys}, value


def test_uint64_and_float_extremes(spark):
    m = EXAMPLES_CLASS(f_uint64=2**64 - 1, f_fixed64=2**63, f_uint32=2**32 - 1, f_float=float("inf"))
    (row,) = jvm_rows(spark, [m.SerializeToString()], "dagger.test.Everything")
    assert row["f_uint64"] == decimal.Decimal(2**64 - 1)
    assert row["f_fixed64"] == decimal.Decimal(2**63)
    assert row["f_uint32"] == 2**32 - 1
    assert row["f_float"] == float("inf")
