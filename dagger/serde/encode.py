"""Vectorized Arrow → protobuf encoding for sinks.

:class:`ProtoEncoder` maps the columns of an outgoing batch onto the fields of a message by name, as
Dagger's Kafka sink does: a column fills the field of the same name, a dotted column (``pickup.name``)
fills a nested field, a column that matches no field is ignored, and a null leaves the field unset. Each
column is cast to the exact Arrow type ptars expects for its field first (ptars silently drops a column
whose type differs), so an impossible conversion is an error naming the column and the field. Enum names
are checked, vectorized, against the enum's values. ptars then encodes the whole batch in Rust.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from dagger.errors import SinkError
from dagger.serde.decode import ptars_handler


def _nullable(t: pa.DataType) -> pa.DataType:
    """The same Arrow type with every nested field nullable (nulls mean "unset" to ptars)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _nullable(f.type), nullable=True) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _nullable(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _nullable(t.value_type), nullable=True))
    return t


class ProtoEncoder:
    """Encode Arrow batches into serialized messages of one type.

    Parameters
    ----------
    descriptor:
        The target message.
    key:
        Config key that named the message, used in error messages (``SINK_KAFKA_PROTO_MESSAGE``).
    """

    def __init__(self, descriptor: Descriptor, key: str = "SINK_KAFKA_PROTO_MESSAGE"):
        self.descriptor = descriptor
        self.key = key
        self._handler = ptars_handler(descriptor)
        ptars_schema: pa.Schema = self._handler.schema()
        self.schema = pa.schema([pa.field(f.name, _nullable(f.type), nullable=True) for f in ptars_schema])

    # -- planning (also used by `dagger validate` on an empty batch) ------------------------------------

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.BinaryArray:
        """Serialize every row of ``batch``; raises :class:`SinkError` on an impossible mapping."""
        arrays = self.conform(batch)
        prepared = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        return self._handler.record_batch_to_array(prepared)

    def check(self, schema: pa.Schema) -> list[str]:
        """Problems mapping a batch of ``schema`` onto the message (empty when it maps cleanly)."""
        # pa.nulls, not from_pylist: converting a Python list makes pyarrow import pandas (dagger.session.pandas_free)
        empty = pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        try:
            self.conform(empty)
        except SinkError as exc:
            return [str(exc)]
        return []

    def mapped_columns(self, names: list[str]) -> list[str]:
        """The columns of ``names`` that reach some field (the others are ignored)."""
        fields = {f.name for f in self.descriptor.fields}
        return [n for n in names if n.split(".")[0] in fields]

    def conform(self, batch: pa.RecordBatch | pa.Table) -> list[pa.Array]:
        """One array per message field, cast to the field's type (null where no column maps)."""
        n = batch.num_rows
        columns = {name: _as_array(batch.column(i)) for i, name in enumerate(batch.schema.names)}
        return self._build(self.descriptor, self.schema, columns, n, prefix="")

    def _build(
        self,
        descriptor: Descriptor,
        schema: pa.Schema | pa.StructType,
        columns: dict[str, pa.Array],
        n: int,
        prefix: str,
    ) -> list[pa.Array]:
        nested: dict[str, dict[str, pa.Array]] = {}
        for name, array in columns.items():
            head, dot, rest = name.partition(".")
            if dot:
                nested.setdefault(head, {})[rest] = array
        arrays = []
        for target in schema:
            field = descriptor.fields_by_name[target.name]
            path = prefix + target.name
            if target.name in columns:
                arrays.append(self._cast(columns[target.name], target, field, path))
            elif target.name in nested:
                if field.message_type is None or field.is_repeated or not pa.types.is_struct(target.type):
                    raise SinkError(
                        f"{self.key}: columns {', '.join(path + '.' + c for c in nested[target.name])} address "
                        f"fields inside '{path}', but '{path}' of {self.descriptor.full_name} is not a message field"
                    )
                children = self._build(field.message_type, target.type, nested[target.name], n, path + ".")
                arrays.append(pa.StructArray.from_arrays(children, fields=list(target.type)))
            else:
                arrays.append(pa.nulls(n, target.type))
        # a dotted column whose deeper segment names no field is an error (Dagger: InvalidColumnMapping)
        if prefix:
            known = {f.name for f in schema}
            for name in columns:
                head = name.split(".")[0]
                if head not in known:
                    raise SinkError(
                        f"{self.key}: column '{prefix}{name}' has no field '{head}' in message "
                        f"{descriptor.full_name}; its fields are: {', '.join(sorted(known))}"
                    )
        return arrays

    def _cast(self, array: pa.Array, target: pa.Field, field: FieldDescriptor, path: str) -> pa.Array:
        try:
            if array.type == target.type:
                out = array
            elif pa.types.is_null(array.type):
                out = pa.nulls(len(array), target.type)
            elif pa.types.is_timestamp(target.type) and (
                pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_decimal(array.type)
            ):
                # Dagger reads a number written to a Timestamp field as epoch seconds
                micros = pc.multiply(array.cast(pa.float64()), 1_000_000)
                out = pc.round(micros).cast(pa.int64()).cast(target.type)
            else:
                out = array.cast(target.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise SinkError(
                f"{self.key}: column '{path}' ({_spark_name(array.type)}) cannot be written to field "
                f"'{path}' of {self.descriptor.full_name} ({_spark_name(target.type)}): {_first_line(exc)}"
            ) from None
        if field.type == FieldDescriptor.TYPE_ENUM and not field.is_repeated:
            self._check_enum(out, field, path)
        return out

    def _check_enum(self, array: pa.Array, field: FieldDescriptor, path: str) -> None:
        if not len(array):  # the planning's empty batch
            return
        names = pa.array([v.name for v in field.enum_type.values])
        values = array
        unknown = pc.filter(values, pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, value_set=names))))
        if len(unknown):
            raise SinkError(
                f"{self.key}: column '{path}' holds {unknown[0].as_py()!r}, which is not a value of enum "
                f"{field.enum_type.full_name}; accepted: {', '.join(v.name for v in field.enum_type.values)}"
            )


def _as_array(column: Any) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _spark_name(t: pa.DataType) -> str:
    """A short, SQL-ish name of an Arrow type for error messages."""
    if pa.types.is_struct(t):
        return "STRUCT"
    if pa.types.is_list(t):
        return f"ARRAY<{_spark_name(t.value_type)}>"
    if pa.types.is_map(t):
        return f"MAP<{_spark_name(t.key_type)},{_spark_name(t.item_type)}>"
    return str(t).upper()
