"""Messages whose fields are declared out of field-number order, with gaps and reserved numbers.

ptars lays out its Arrow columns (and nested struct children) in field-number order; tables, sinks and Parquet
mapping follow declaration order. Every path must match fields by name. Random message types are built here:
random field kinds, numbers drawn with gaps around reserved ranges, and a random declaration order for the
message and its nested message; random messages of them are decoded (fully and pruned), encoded back and
converted for BigQuery, and compared field by field with the python-protobuf reference.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2, timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagger.schema.projection import prune_message
from dagger.serde.decode import ProtoDecoder
from dagger.serde.encode import ProtoEncoder
from dagger.serde.reference import message_to_row
from dagger.serde.types import VALIDITY_COLUMN

F = descriptor_pb2.FieldDescriptorProto
KINDS = [
    "int32",
    "int64",
    "uint64",
    "double",
    "float",
    "bool",
    "string",
    "bytes",
    "enum",
    "timestamp",
    "inner",
    "repeated_int64",
    "repeated_inner",
    "map_string_inner",
    "struct",
]
INNER_KINDS = ["string", "int32", "timestamp", "repeated_string"]
_SCALAR = {
    "int32": F.TYPE_INT32,
    "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64,
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
}


@st.composite
def layouts(draw, kinds: list[str], min_size: int, max_size: int):
    """Field kinds, unique numbers (gaps and reserved ranges around them) and a shuffled declaration order."""
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=min_size, max_size=max_size))
    reserved = draw(st.lists(st.integers(1, 80), max_size=4, unique=True))
    numbers = draw(
        st.lists(
            st.integers(1, 120).filter(lambda n: n not in reserved and not 19000 <= n <= 19999),
            min_size=len(chosen),
            max_size=len(chosen),
            unique=True,
        )
    )
    order = draw(st.permutations(range(len(chosen))))
    return [(f"f{numbers[i]}_{chosen[i]}", chosen[i], numbers[i]) for i in order], reserved


def _field(message: descriptor_pb2.DescriptorProto, name: str, kind: str, number: int) -> None:
    field = message.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
    base = kind.removeprefix("repeated_")
    if kind.startswith("repeated_"):
        field.label = F.LABEL_REPEATED
    if base in _SCALAR:
        field.type = _SCALAR[base]
    elif base == "enum":
        field.type, field.type_name = F.TYPE_ENUM, ".order.Color"
    elif base == "timestamp":
        field.type, field.type_name = F.TYPE_MESSAGE, ".google.protobuf.Timestamp"
    elif base == "struct":
        field.type, field.type_name = F.TYPE_MESSAGE, ".google.protobuf.Struct"
    elif base == "inner":
        field.type, field.type_name = F.TYPE_MESSAGE, ".order.Inner"
    elif kind == "map_string_inner":
        entry = message.nested_type.add(name=f"{name.title().replace('_', '')}Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=".order.Inner", label=F.LABEL_OPTIONAL)
        field.label, field.type, field.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f".order.Outer.{entry.name}"


def build(outer_layout, inner_layout):  # noqa: ANN001, ANN201
    """A descriptor pool holding ``order.Outer`` and ``order.Inner`` with the given layouts."""
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="order", syntax="proto3")
    file.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/struct.proto"])
    color = file.enum_type.add(name="Color")
    for i, value in enumerate(["NONE", "RED", "GREEN"]):
        color.value.add(name=value, number=i)
    inner = file.message_type.add(name="Inner")
    for name, kind, number in inner_layout[0]:
        _field(inner, name, kind, number)
    for start in inner_layout[1]:
        inner.reserved_range.add(start=start, end=start + 1)
    outer = file.message_type.add(name="Outer")
    for name, kind, number in outer_layout[0]:
        _field(outer, name, kind, number)
    for start in outer_layout[1]:
        outer.reserved_range.add(start=start, end=start + 1)
    pool = descriptor_pool.DescriptorPool()
    for dependency in (timestamp_pb2, struct_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        dependency.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    pool.Add(file)
    fds = descriptor_pb2.FileDescriptorSet()
    for dependency in (timestamp_pb2, struct_pb2):
        dependency.DESCRIPTOR.CopyToProto(fds.file.add())
    fds.file.add().CopyFrom(file)
    return pool.FindMessageTypeByName("order.Outer"), fds


seconds = st.integers(0, 4_000_000_000)


def _fill(data, message, descriptor) -> None:  # noqa: ANN001
    """Random values for every field of ``message`` (each left unset now and then)."""
    for field in descriptor.fields:
        if not data.draw(st.integers(0, 4)):
            continue
        kind = field.name.split("_", 1)[1]
        base = kind.removeprefix("repeated_")
        if kind == "map_string_inner":
            for key in data.draw(st.lists(st.text(max_size=4), max_size=2, unique=True)):
                _fill(data, getattr(message, field.name)[key], field.message_type.fields_by_name["value"].message_type)
        elif kind.startswith("repeated_"):
            if base == "inner":
                for _ in range(data.draw(st.integers(0, 2))):
                    _fill(data, getattr(message, field.name).add(), field.message_type)
            else:
                strategy = st.integers(-(2**63), 2**63 - 1) if base == "int64" else st.text(max_size=4)
                getattr(message, field.name).extend(data.draw(st.lists(strategy, max_size=3)))
        elif base == "inner":
            _fill(data, getattr(message, field.name), field.message_type)
            getattr(message, field.name).SetInParent()
        elif base == "timestamp":
            getattr(message, field.name).FromMicroseconds(
                data.draw(seconds) * 1_000_000 + data.draw(st.integers(0, 999_999))
            )
        elif base == "struct":
            getattr(message, field.name).update(
                {"n": data.draw(st.integers(-99, 99)), "s": data.draw(st.text(max_size=3))}
            )
        else:
            strategies = {
                "int32": st.integers(-(2**31), 2**31 - 1),
                "int64": st.integers(-(2**63), 2**63 - 1),
                "uint64": st.integers(0, 2**64 - 1),
                "double": st.floats(allow_nan=False, allow_infinity=False),
                "float": st.floats(allow_nan=False, allow_infinity=False, width=32),
                "bool": st.booleans(),
                "string": st.text(max_size=6),
                "bytes": st.binary(max_size=6),
                "enum": st.integers(0, 2),
            }
            setattr(message, field.name, data.draw(strategies[base]))


def _same(got, want, name: str) -> None:  # noqa: ANN001
    if isinstance(want, list) and name.endswith("map_string_inner"):
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    assert got == want, name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(layouts(KINDS, 3, 9), layouts(INNER_KINDS, 2, 4), st.data())
def test_random_declaration_orders_decode_prune_and_encode_by_field(outer_layout, inner_layout, data):
    descriptor, fds = build(outer_layout, inner_layout)
    Outer = message_factory.GetMessageClass(descriptor)
    messages = []
    for _ in range(data.draw(st.integers(1, 4))):
        message = Outer()
        _fill(data, message, descriptor)
        messages.append(message)
    payloads = [m.SerializeToString() for m in messages]
    timestamps = [f.number for f in descriptor.fields if f.name.endswith("_timestamp")]

    decoder = ProtoDecoder(descriptor, timestamps[0] if timestamps else None)
    result = decoder.decode(pa.array(payloads, pa.binary()))
    assert result.invalid == []
    assert result.batch.schema.names == [f.name for f in descriptor.fields] + [VALIDITY_COLUMN, "rowtime"]
    rows = result.batch.to_pylist()
    for message, row in zip(messages, rows, strict=True):
        for name, want in message_to_row(message).items():
            _same(row[name], want, name)
        if timestamps:
            stamp = getattr(message, descriptor.fields_by_number[timestamps[0]].name)
            want = (
                stamp.ToDatetime(dt.UTC) if message.HasField(descriptor.fields_by_number[timestamps[0]].name) else None
            )
            assert row["rowtime"] == (want or dt.datetime(1970, 1, 1, tzinfo=dt.UTC))

    # pruned decoding (the fields a query names): same values for the kept fields
    keep = data.draw(st.lists(st.sampled_from([f.name for f in descriptor.fields]), min_size=1, unique=True))
    pool = descriptor_pool.DescriptorPool()
    for file in prune_message(fds, "order.Outer", keep).file:
        pool.Add(file)
    pruned = ProtoDecoder(pool.FindMessageTypeByName("order.Outer"), None)
    pruned_rows = pruned.decode(payloads).batch.to_pylist()
    for row, pruned_row in zip(rows, pruned_rows, strict=True):
        for name in keep:
            _same(pruned_row[name], row[name], name)

    # encoding back: every field arrives in the field of its name (Struct fields are read-only)
    struct_fields = [f.name for f in descriptor.fields if f.name.endswith("_struct")]
    encoded = ProtoEncoder(descriptor).encode(result.batch.drop_columns(struct_fields))
    for message, blob in zip(messages, encoded.to_pylist(), strict=True):
        want = Outer()
        want.CopyFrom(message)
        for name in struct_fields:
            want.ClearField(name)
        _equal_rows(message_to_row(Outer.FromString(blob)), message_to_row(want))

    # BigQuery rows: each column of the table holds the field of its name
    from dagger.bigquery.schema import RowConverter
    from dagger.errors import SinkError

    converter = RowConverter(descriptor, "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS")
    too_big = [
        f.name
        for f in descriptor.fields
        if f.name.endswith("_uint64") and any(getattr(m, f.name) >= 2**63 for m in messages)
    ]
    if too_big:  # BigQuery's INTEGER is signed 64-bit: such rows are refused (and dead-lettered by the sink)
        with pytest.raises(SinkError, match="not in range"):
            converter.convert(result.batch)
        return
    converted = converter.convert(result.batch)
    assert converted.schema.names == [f.name for f in descriptor.fields]
    for name in converted.schema.names:
        kind = name.split("_", 1)[1]
        if kind in ("int32", "int64", "bool", "string", "bytes", "double"):
            assert converted.column(name).to_pylist() == result.batch.column(name).to_pylist(), name


def _equal_rows(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in b:
        _same(a[name], b[name], name)


def test_daggers_quickstart_message_decodes_field_41_before_40():
    """The message of Raystack Dagger's quickstart, as published, with Struct and map fields set."""
    from testing.samples import example_descriptors

    descriptor = example_descriptors().find_message("org.raystack.dagger.consumer.TestBookingLogMessage")
    declared = [f.name for f in descriptor.fields]
    assert declared.index("booking_creation_time") < declared.index("total_customer_discount")
    Message = message_factory.GetMessageClass(descriptor)
    m = Message(order_number="ynnhjv45", total_customer_discount=2.5, customer_price=12.75)
    m.event_timestamp.FromSeconds(1_700_000_000)
    m.booking_creation_time.FromSeconds(1_699_999_000)
    m.metadata["city"] = "Jakarta"
    m.profile_data.update({"tier": "gold", "score": 4.5})
    m.driver_pickup_location.latitude = 19.075983
    row = ProtoDecoder(descriptor, 5).decode([m.SerializeToString()]).batch.to_pylist()[0]
    assert row["total_customer_discount"] == 2.5
    assert row["booking_creation_time"] == dt.datetime.fromtimestamp(1_699_999_000, dt.UTC)
    assert row["metadata"] == [("city", "Jakarta")]
    assert row["profile_data"] == '{"score":4.5,"tier":"gold"}'
    assert row["driver_pickup_location"]["latitude"] == 19.075983
    assert row["rowtime"] == dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
