"""Protobuf → Spark type mapping (DESIGN.md §5), and the columns of an input table.

=============================================  ======================================================
protobuf                                       Spark SQL
=============================================  ======================================================
int32, sint32, sfixed32                        INT
int64, sint64, sfixed64                        BIGINT
uint32, fixed32 (unsigned 32-bit)              BIGINT
uint64, fixed64 (unsigned 64-bit)              DECIMAL(20,0)
float / double                                 FLOAT / DOUBLE
bool / string / bytes                          BOOLEAN / STRING / BINARY
enum                                           STRING (value name; an unknown number as its digits)
message                                        STRUCT (NULL when unset)
repeated T / map<K,V>                          ARRAY<T> / MAP<K,V>
google.protobuf.Timestamp                      TIMESTAMP (microseconds, UTC)
google.protobuf.Duration                       BIGINT (microseconds)
google.protobuf.*Value wrappers                the wrapped scalar, NULL when unset
google.protobuf.Struct / Value / ListValue     STRING holding JSON
recursive message (a type already on the path)  BINARY (the serialized sub-message)
proto3 ``optional`` and ``oneof`` members      nullable; NULL when unset
=============================================  ======================================================

Every input table has the message's top-level fields in declaration order, then the boolean
``__internal_validation_field__`` and then the rowtime column (``FLINK_ROWTIME_ATTRIBUTE_NAME``), as in
Dagger.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dagger.errors import DaggerConfigError
from dagger.plugins.format import VALIDITY_COLUMN

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
JSON_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
WRAPPERS = {
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

_SCALARS: dict[int, DataType] = {
    FieldDescriptor.TYPE_INT32: IntegerType(),
    FieldDescriptor.TYPE_SINT32: IntegerType(),
    FieldDescriptor.TYPE_SFIXED32: IntegerType(),
    FieldDescriptor.TYPE_INT64: LongType(),
    FieldDescriptor.TYPE_SINT64: LongType(),
    FieldDescriptor.TYPE_SFIXED64: LongType(),
    FieldDescriptor.TYPE_UINT32: LongType(),
    FieldDescriptor.TYPE_FIXED32: LongType(),
    FieldDescriptor.TYPE_UINT64: DecimalType(20, 0),
    FieldDescriptor.TYPE_FIXED64: DecimalType(20, 0),
    FieldDescriptor.TYPE_FLOAT: FloatType(),
    FieldDescriptor.TYPE_DOUBLE: DoubleType(),
    FieldDescriptor.TYPE_BOOL: BooleanType(),
    FieldDescriptor.TYPE_STRING: StringType(),
    FieldDescriptor.TYPE_BYTES: BinaryType(),
    FieldDescriptor.TYPE_ENUM: StringType(),
}


def is_map(field: FieldDescriptor) -> bool:
    """True for ``map<K, V>`` fields."""
    return (
        field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry and field.is_repeated
    )


def is_repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def field_type(field: FieldDescriptor, path: tuple[str, ...] = ()) -> DataType:
    """The Spark type of one field, including ``repeated`` and ``map``."""
    if is_map(field):
        entry = field.message_type
        key = entry.fields_by_name["key"]
        value = entry.fields_by_name["value"]
        return MapType(_single_type(key, path), _single_type(value, path), valueContainsNull=True)
    single = _single_type(field, path)
    if is_repeated(field):
        return ArrayType(single, containsNull=True)
    return single


def _single_type(field: FieldDescriptor, path: tuple[str, ...]) -> DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        return message_type(field.message_type, path)
    return _SCALARS[field.type]


def message_type(descriptor: Descriptor, path: tuple[str, ...] = ()) -> DataType:
    """The Spark type of a message used as a field value (well-known types get their own mapping)."""
    name = descriptor.full_name
    if name == TIMESTAMP:
        return TimestampType()
    if name == DURATION:
        return LongType()
    if name in JSON_TYPES:
        return StringType()
    if name in WRAPPERS:
        return _single_type(descriptor.fields_by_name["value"], path)
    if name in path:
        return BinaryType()  # recursion: the sub-message stays serialized
    return message_struct(descriptor, path + (name,))


def message_struct(descriptor: Descriptor, path: tuple[str, ...] | None = None) -> StructType:
    """The Spark struct of a message: one nullable field per proto field, in declaration order."""
    path = (descriptor.full_name,) if path is None else path
    return StructType([StructField(f.name, field_type(f, path), nullable=True) for f in descriptor.fields])


def table_schema(descriptor: Descriptor, rowtime: str = "rowtime") -> StructType:
    """The columns of an input table: the message fields, the validity flag, then rowtime."""
    return input_table(message_struct(descriptor), rowtime, f"message {descriptor.full_name}")


def input_table(record: StructType, rowtime: str, owner: str) -> StructType:
    """The columns of an input table whose records have the columns of ``record`` (``owner`` names their schema in
    errors): those, the validity flag, then rowtime."""
    fields = list(record.fields)
    names = {f.name for f in fields}
    for extra in (VALIDITY_COLUMN, rowtime):
        if extra in names:
            raise ValueError(f"{owner} already has a field named {extra!r}")
    fields.append(StructField(VALIDITY_COLUMN, BooleanType(), nullable=False))
    fields.append(StructField(rowtime, TimestampType(), nullable=True))
    return StructType(fields)


def contains_json_type(descriptor: Descriptor, path: tuple[str, ...] = ()) -> bool:
    """Whether a message has a Struct/Value/ListValue anywhere below it (those need the slow path)."""
    if descriptor.full_name in JSON_TYPES:
        return True
    if descriptor.full_name in path:
        return False
    for f in descriptor.fields:
        if f.type == FieldDescriptor.TYPE_MESSAGE and contains_json_type(
            f.message_type, path + (descriptor.full_name,)
        ):
            return True
    return False


def timestamp_field(
    descriptor: Descriptor, number: int, key: str = "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"
) -> FieldDescriptor:
    """The top-level Timestamp field with proto field number ``number``, or a clear error."""

    field = descriptor.fields_by_number.get(number)
    timestamps = [
        f"{f.name} = {f.number}"
        for f in descriptor.fields
        if f.message_type and f.message_type.full_name == TIMESTAMP and not f.is_repeated
    ]
    if field is None:
        raise DaggerConfigError(
            f"{key}: {descriptor.full_name} has no field number {number}; its Timestamp fields are: "
            f"{', '.join(timestamps) or 'none'}"
        )
    if field.message_type is None or field.message_type.full_name != TIMESTAMP or field.is_repeated:
        raise DaggerConfigError(
            f"{key}: field {number} of {descriptor.full_name} is '{field.name}', which is not a "
            f"google.protobuf.Timestamp; Timestamp fields: {', '.join(timestamps) or 'none'}"
        )
    return field
