"""The BigQuery sink's table schema from its proto message (the project's type mapping in reverse), and the
conversion of ptars' Arrow batches into the Arrow types the Storage Write API takes (runs on the executors; the
converters are built once per worker)."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dagger.errors import SinkError
from dagger.schema.descriptor_sets import build_pool
from dagger.serde.types import DURATION, JSON_TYPES, TIMESTAMP, WRAPPERS, is_map
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    pass


def bigquery_schema(descriptor: Any) -> list[Any]:
    """The BigQuery table schema (``SchemaField`` list) of a proto message."""
    return [_schema_field(f, (descriptor.full_name,)) for f in descriptor.fields]


def _schema_field(field: Any, path: tuple[str, ...]) -> Any:
    from google.cloud.bigquery import SchemaField
    from google.protobuf.descriptor import FieldDescriptor

    mode = "REPEATED" if field.is_repeated else "NULLABLE"
    if is_map(field):
        entry = field.message_type
        subfields = [_schema_field(entry.fields_by_name[n], path) for n in ("key", "value")]
        return SchemaField(field.name, "RECORD", mode="REPEATED", fields=subfields)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        full = field.message_type.full_name
        if full == TIMESTAMP:
            return SchemaField(field.name, "TIMESTAMP", mode=mode)
        if full == DURATION:
            parts = [SchemaField("seconds", "INTEGER"), SchemaField("nanos", "INTEGER")]
            return SchemaField(field.name, "RECORD", mode=mode, fields=parts)
        if full in JSON_TYPES:
            return SchemaField(field.name, "STRING", mode=mode)
        if full in WRAPPERS:
            inner = _schema_field(field.message_type.fields_by_name["value"], path)
            return SchemaField(field.name, inner.field_type, mode=mode)
        if full in path:  # recursive message: kept serialized, as on input
            return SchemaField(field.name, "BYTES", mode=mode)
        subfields = [_schema_field(f, (*path, full)) for f in field.message_type.fields]
        return SchemaField(field.name, "RECORD", mode=mode, fields=subfields)
    kind = {
        FieldDescriptor.TYPE_FLOAT: "FLOAT",
        FieldDescriptor.TYPE_DOUBLE: "FLOAT",
        FieldDescriptor.TYPE_BOOL: "BOOLEAN",
        FieldDescriptor.TYPE_STRING: "STRING",
        FieldDescriptor.TYPE_BYTES: "BYTES",
        FieldDescriptor.TYPE_ENUM: "STRING",
    }.get(field.type, "INTEGER")
    return SchemaField(field.name, kind, mode=mode)


def arrow_schema(fields: list[Any]) -> pa.Schema:
    """The Arrow schema the Storage Write API expects for BigQuery ``fields``."""
    return pa.schema([_arrow_field(f) for f in fields])


def _arrow_field(field: Any) -> pa.Field:
    scalar = {
        "INTEGER": pa.int64(),
        "FLOAT": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "STRING": pa.string(),
        "BYTES": pa.binary(),
        "TIMESTAMP": pa.timestamp("us", "UTC"),
    }
    if field.field_type == "RECORD":
        t: pa.DataType = pa.struct([_arrow_field(f) for f in field.fields])
    else:
        t = scalar[field.field_type]
    if field.mode == "REPEATED":
        return pa.field(field.name, pa.list_(pa.field("item", t, nullable=False)), nullable=False)
    return pa.field(field.name, t)


def missing_fields(existing: list[Any], wanted: list[Any]) -> tuple[list[Any], list[str]]:
    """``existing`` with the fields of ``wanted`` it lacks added (recursively); and the added paths."""
    from google.cloud.bigquery import SchemaField

    by_name = {f.name: f for f in existing}
    merged, added = [], []
    for field in existing:
        want = next((w for w in wanted if w.name == field.name), None)
        if want is not None and field.field_type == "RECORD" and want.field_type == "RECORD":
            sub, sub_added = missing_fields(list(field.fields), list(want.fields))
            if sub_added:
                field = SchemaField(field.name, "RECORD", mode=field.mode, fields=sub, description=field.description)
                added.extend(f"{field.name}.{a}" for a in sub_added)
        merged.append(field)
    for want in wanted:
        if want.name not in by_name:
            merged.append(want)
            added.append(want.name)
    return merged, added


# -- Arrow conversion ------------------------------------------------------------------------------------


def _to_bigquery(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Convert a proto-typed (ptars) Arrow array to the BigQuery Arrow type."""
    t = array.type
    if pa.types.is_list(target):
        if pa.types.is_map(t):
            entries = pa.StructArray.from_arrays([t_ for t_ in (array.keys, array.items)], names=["key", "value"])
            values = _to_bigquery(entries, target.value_type)
        else:
            values = _to_bigquery(array.flatten(), target.value_type)
        offsets = array.offsets
        if array.null_count:
            # BigQuery has no NULL array: a null repeated field is written empty
            offsets = pc.fill_null(offsets, 0) if offsets.null_count else offsets
            starts = offsets.slice(0, len(array))
            ends = offsets.slice(1, len(array))
            lengths = pc.if_else(array.is_valid(), pc.subtract(ends, starts), 0)
            values = _take_ranges(values, starts, lengths, array.is_valid())
            offsets = pa.array([0, *pc.cumulative_sum(lengths).to_pylist()], pa.int32())
        elif array.offset or offsets[0].as_py():
            start = offsets[0].as_py()
            values = values.slice(start, offsets[-1].as_py() - start)
            offsets = pc.subtract(offsets, start)
        return pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, type=target)
    if pa.types.is_struct(target):
        if pa.types.is_duration(t):
            micros = array.cast(pa.int64())
            seconds = pc.floor(pc.divide(micros.cast(pa.float64()), 1_000_000)).cast(pa.int64())
            nanos = pc.multiply(pc.subtract(micros, pc.multiply(seconds, 1_000_000)), 1000)
            children = [seconds, nanos]
        else:
            children = [_to_bigquery(_child(array, f.name), f.type) for f in target]
        mask = pc.invert(array.is_valid()) if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if t == target:
        return array
    return array.cast(target, safe=True)


def _child(array: pa.StructArray, name: str) -> pa.Array:
    index = array.type.get_field_index(name)
    return array.field(index) if not array.offset else array.flatten()[index]


def _take_ranges(values: pa.Array, starts: pa.Array, lengths: pa.Array, valid: pa.Array) -> pa.Array:
    indices = [
        i
        for s, n, v in zip(starts.to_pylist(), lengths.to_pylist(), valid.to_pylist(), strict=True)
        if v
        for i in range(s, s + n)
    ]
    return values.take(pa.array(indices, pa.int64()))


_CONVERTERS = BuiltCache(32)


class RowConverter:
    """Arrow batches of SQL output → Arrow batches in the table's schema, typed through the proto message."""

    def __init__(self, descriptor: Any, key: str):
        from dagger.serde.encode import ProtoEncoder  # start-up: loads numpy

        self.encoder = ProtoEncoder(descriptor, key)
        self.encoder.schema = pa.schema([_json_as_string(f, descriptor) for f in self.encoder.schema])
        self.schema = arrow_schema(bigquery_schema(descriptor))

    def convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Raises SinkError when some row cannot be typed (callers isolate the row)."""
        # the encoder's arrays follow ptars's field-number order, the table's columns the declaration order
        arrays = dict(zip(self.encoder.schema.names, self.encoder.conform(batch), strict=True))
        try:
            out = [_to_bigquery(arrays[f.name], f.type) for f in self.schema]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise SinkError(f"{self.encoder.key}: {str(exc).splitlines()[0]}") from None
        return pa.RecordBatch.from_arrays(out, schema=self.schema)


def _json_as_string(field: pa.Field, descriptor: Any) -> pa.Field:
    """Struct/Value/ListValue fields are written as JSON strings (the SQL side holds them as JSON text)."""
    proto = descriptor.fields_by_name[field.name]
    if proto.message_type is None or proto.message_type.full_name in (TIMESTAMP, DURATION):
        return field
    if proto.message_type.full_name in JSON_TYPES:
        t = pa.list_(pa.string()) if proto.is_repeated else pa.string()
        return pa.field(field.name, t)
    if pa.types.is_struct(field.type):
        children = [_json_as_string(f, proto.message_type) for f in field.type]
        return pa.field(field.name, pa.struct(children))
    return field


def row_converter(descriptor_set_b64: str, message: str) -> RowConverter:
    """One converter per (descriptor set, message) per Python worker."""

    def build() -> RowConverter:
        from google.protobuf import descriptor_pb2

        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(descriptor_set_b64))
        descriptor = build_pool(fds).FindMessageTypeByName(message)
        return RowConverter(descriptor, "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS")

    return _CONVERTERS.get(content_key(message, descriptor_set_b64), build)
