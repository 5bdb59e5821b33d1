"""A slow, obviously-correct protobuf → Python converter on plain python-protobuf.

It produces, per message, the Python values that the type mapping of :mod:`dagger.serde.types` calls for.
Two uses only: tests compare the fast ptars path against it, and the decoder uses it for the rare columns
ptars cannot map (``google.protobuf.Struct``/``Value``/``ListValue`` become JSON strings).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from dagger.serde.types import DURATION, JSON_TYPES, TIMESTAMP, WRAPPERS, is_map

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_UNSIGNED64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)
_MESSAGES = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP)  # a proto2 group is a message


def message_to_row(message: Message, path: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Convert one message into ``{field: value}`` following the project's type mapping."""
    descriptor = message.DESCRIPTOR
    path = (descriptor.full_name,) if path is None else path
    row: dict[str, Any] = {}
    for field in descriptor.fields:
        row[field.name] = field_value(message, field, path)
    return row


def field_value(message: Message, field: FieldDescriptor, path: tuple[str, ...]) -> Any:
    """The mapped value of one field of ``message``."""
    value = getattr(message, field.name)
    if is_map(field):
        value_field = field.message_type.fields_by_name["value"]
        return [(k, _single(v, value_field, path)) for k, v in value.items()]
    if field.is_repeated:
        return [_single(v, field, path) for v in value]
    if field.type in _MESSAGES:
        if not message.HasField(field.name):
            return None
        return _single(value, field, path)
    if field.has_presence and not message.HasField(field.name):
        return None  # proto3 optional and oneof members
    return _single(value, field, path)


def _single(value: Any, field: FieldDescriptor, path: tuple[str, ...]) -> Any:
    if field.type in _MESSAGES:
        return _message_value(value, field.message_type, path)
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if field.type in _UNSIGNED64:
        return decimal.Decimal(value)
    return value


def _message_value(value: Message, descriptor: Descriptor, path: tuple[str, ...]) -> Any:
    name = descriptor.full_name
    if name == TIMESTAMP:
        return _EPOCH + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
    if name == DURATION:
        return value.seconds * 1_000_000 + int(value.nanos / 1000)
    if name in JSON_TYPES:
        return json.dumps(json_format.MessageToDict(value), separators=(",", ":"), sort_keys=True)
    if name in WRAPPERS:
        return _single(value.value, descriptor.fields_by_name["value"], path)
    if name in path:
        return value.SerializeToString()
    return message_to_row(value, path + (name,))
