"""Spark ``VARIANT`` columns in the Arrow batches sinks receive: values of their own JSON type.

A lookup with ``retain_response_type: true`` and no ``type`` keeps each response value untyped, as Dagger does
(a JSON number stays a number, a string a string). Spark needs one type per column, so such outputs are
``VARIANT`` columns; Arrow carries them as ``struct<value: binary, metadata: binary>``, its ``metadata`` child
marked with the field metadata ``variant: 'true'``. Sinks take them through :func:`typed_variants`, which gives each such column the one Arrow
type its values share in the batch (``int64``, ``float64``, ``bool`` or ``string``), and JSON text marked
:data:`JSON_TEXT` when they share none (objects, arrays, mixed types), which JSON writers embed as is.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

import pyarrow as pa

JSON_TEXT = b"dagger.json"  # field metadata key: the string column holds JSON text, to embed unquoted


def is_variant(field: pa.Field) -> bool:
    """Whether ``field`` is a Spark ``VARIANT`` column in Arrow form."""
    t = field.type
    if not pa.types.is_struct(t) or t.num_fields != 2 or t.field(0).name != "value":
        return False
    child = t.field(1)  # Spark marks the struct's `metadata` child
    return child.name == "metadata" and bool(child.metadata) and child.metadata.get(b"variant") == b"true"


def without_variants(schema: pa.Schema) -> pa.Schema:
    """``schema`` without its ``VARIANT`` fields (their values' types are known only per batch)."""
    return pa.schema([f for f in schema if not is_variant(f)])


def variant_values(column: pa.Array) -> list[Any]:
    """The Python value of each variant in ``column`` (``None`` for a null row or a JSON null)."""
    from pyspark.sql.types import VariantVal

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    valid = column.is_valid().to_pylist()
    values = column.field("value").to_pylist()
    metadata = column.field("metadata").to_pylist()
    return [VariantVal(v, m).toPython() if ok else None for ok, v, m in zip(valid, values, metadata, strict=True)]


def _typed(values: list[Any]) -> tuple[pa.Array, bool]:
    """``values`` as one Arrow array of their shared type; ``(array, is_json_text)``."""
    present = [v for v in values if v is not None]
    kinds = {bool if isinstance(v, bool) else type(v) for v in present}
    if kinds <= {int}:
        return pa.array(values, pa.int64()), False
    if kinds <= {int, float, decimal.Decimal}:  # Spark parses 2.25 as a decimal: a DOUBLE, as in Dagger
        return pa.array([None if v is None else float(v) for v in values], pa.float64()), False
    if kinds == {bool}:
        return pa.array(values, pa.bool_()), False
    if kinds == {str}:
        return pa.array(values, pa.string()), False
    return pa.array([None if v is None else json.dumps(v, default=str) for v in values], pa.string()), True


def typed_variants(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with each ``VARIANT`` column replaced by its values in their shared Arrow type (see the module)."""
    if not any(is_variant(f) for f in batch.schema):
        return batch
    fields, columns = [], []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if is_variant(field):
            column, text = _typed(variant_values(column))
            field = pa.field(field.name, column.type, True, {JSON_TEXT: b"true"} if text else None)
        fields.append(field)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def is_json_text(field: pa.Field) -> bool:
    """Whether ``field`` holds JSON text to embed unquoted (a variant column of objects, arrays or mixed types)."""
    return bool(field.metadata) and field.metadata.get(JSON_TEXT) == b"true"
