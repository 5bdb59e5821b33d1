"""Random protobuf messages of any message type, for property tests of the decoders and encoders: every field kind
(scalars at their extremes, NaN and infinities, unknown enum numbers where the enum is open), presence left unset
at random, oneofs with one member or none, repeated fields and maps, the well-known types (Timestamp, Duration,
wrappers, Struct/Value/ListValue) and recursive messages to a bounded depth."""

from __future__ import annotations

from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

F = FieldDescriptor
_INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}
_WRAPPERS = {
    "google.protobuf.DoubleValue",
    "google.protobuf.FloatValue",
    "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value",
    "google.protobuf.Int32Value",
    "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue",
    "google.protobuf.StringValue",
    "google.protobuf.BytesValue",
}
#: how deep messages nest below the top (recursive types stop here)
MAX_DEPTH = 3

json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([low, high, 0, 1, -1 if low < 0 else 2]), st.integers(low, high))


def scalar(field: FieldDescriptor, open_enums: bool = True) -> st.SearchStrategy[Any]:
    """Values of a scalar field."""
    t = field.type
    if t in _INTS:
        return _ints(*_INTS[t])
    if t == F.TYPE_DOUBLE:
        return st.floats(width=64)
    if t == F.TYPE_FLOAT:
        return st.floats(width=32)
    if t == F.TYPE_BOOL:
        return st.booleans()
    if t == F.TYPE_STRING:
        return st.text(max_size=6)
    if t == F.TYPE_BYTES:
        return st.binary(max_size=6)
    if t == F.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        if open_enums and not field.enum_type.is_closed:
            return st.sampled_from(known) | st.sampled_from([7, 1000, -5])
        return st.sampled_from(known)
    raise ValueError(f"not a scalar: {field.full_name}")


@st.composite
def messages(draw: Any, descriptor: Descriptor, unknown_enums: bool = True) -> Any:
    """A message of ``descriptor``'s type (``unknown_enums``: open enums may hold numbers they do not name)."""
    message = message_factory.GetMessageClass(descriptor)()
    _fill(draw, message, descriptor, 0, unknown_enums)
    return message


def _fill(draw: Any, message: Any, descriptor: Descriptor, depth: int, unknown: bool = True) -> None:
    name = descriptor.full_name
    if name == "google.protobuf.Timestamp":
        message.seconds = draw(st.integers(-62104060800, 253402300799))  # years 2 to 9999
        message.nanos = draw(st.integers(0, 999_999_999))
        return
    if name == "google.protobuf.Duration":
        message.seconds = draw(st.integers(-(10**9), 10**9))
        nanos = draw(st.integers(0, 999_999_999))
        message.nanos = nanos if message.seconds > 0 else -nanos if message.seconds < 0 else nanos
        return
    if name == "google.protobuf.Struct":
        message.update(draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3)))
        return
    if name == "google.protobuf.ListValue":
        message.extend(draw(st.lists(json_values, max_size=3)))
        return
    if name == "google.protobuf.Value":
        value = draw(json_values)
        if value is None:
            message.null_value = 0
        elif isinstance(value, bool):
            message.bool_value = value
        elif isinstance(value, float):
            message.number_value = value
        elif isinstance(value, str):
            message.string_value = value
        elif isinstance(value, list):
            message.list_value.extend(value)
        else:
            message.struct_value.update(value)
        return
    chosen = {}
    for oneof in descriptor.oneofs:
        if getattr(oneof, "has_presence", False) and len(oneof.fields) == 1 and oneof.name.startswith("_"):
            continue  # proto3 optional's synthetic oneof
        members = [f.name for f in oneof.fields]
        chosen[oneof.name] = draw(st.sampled_from([None, *members]))
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.name in chosen:
            if chosen[oneof.name] != field.name:
                continue
        elif field.has_presence and not draw(st.booleans()):
            continue  # left unset
        _set(draw, message, field, depth, unknown)


def _set(draw: Any, message: Any, field: FieldDescriptor, depth: int, unknown: bool) -> None:
    from dagger.serde.types import is_map

    if is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        entries = draw(st.dictionaries(scalar(key), st.just(None), max_size=3))
        target = getattr(message, field.name)
        for k in entries:
            if value.type == F.TYPE_MESSAGE:
                if depth >= MAX_DEPTH:
                    continue
                _fill(draw, target[k], value.message_type, depth + 1, unknown)  # reading the key makes its entry
            else:
                target[k] = draw(scalar(value, unknown))
        return
    if field.is_repeated:
        target = getattr(message, field.name)
        count = draw(st.integers(0, 3 if depth < MAX_DEPTH else 0))
        for _ in range(count):
            if field.type == F.TYPE_MESSAGE:
                _fill(draw, target.add(), field.message_type, depth + 1, unknown)
            else:
                target.append(draw(scalar(field, unknown)))
        return
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        if depth >= MAX_DEPTH and field.message_type.full_name not in _WRAPPERS:
            return
        target = getattr(message, field.name)
        target.SetInParent()
        _fill(draw, target, field.message_type, depth + 1, unknown)
        return
    setattr(message, field.name, draw(scalar(field, unknown)))
