"""Rows → Avro for the Kafka sink (``SINK_KAFKA_DATA_TYPE=AVRO``), encoded by Spark's Avro writer (``to_avro``)
in the JVM; the sink's Python writer only puts Confluent's header in front (:func:`dagger.serde.confluent_header.framed`).

* :func:`derived_schema`: the Avro record of the output columns (``SINK_KAFKA_SCHEMA_AUTO_REGISTER=true``), as a
  registry keeps it best for evolution: a nullable column is ``["null", T]`` with default ``null``.
* :func:`fit_problems`: whether the output fits a schema looked up in the registry (names and types), said at
  ``dagger validate`` and at start, before a record is written. A row holding a null where the schema's field is
  not a union with null is rejected by the sink (dead letters), not the whole batch.
* :func:`avro_column`: the JVM column holding each row's datum.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa


def _avro_type(arrow: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_integer(arrow):
        return "long" if arrow.bit_width > 32 else "int"
    if pa.types.is_float32(arrow):
        return "float"
    if pa.types.is_floating(arrow):
        return "double"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "string"
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
        return "bytes"
    if pa.types.is_decimal(arrow):
        return {"type": "bytes", "logicalType": "decimal", "precision": arrow.precision, "scale": arrow.scale}
    if pa.types.is_date(arrow):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(arrow):
        logical = "timestamp-micros" if arrow.tz else "local-timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_map(arrow):
        return {"type": "map", "values": _field_type(arrow.item_field, f"{name}_value", namespace)}
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return {"type": "array", "items": _field_type(arrow.value_field, f"{name}_item", namespace)}
    if pa.types.is_struct(arrow):
        return _record([arrow.field(i) for i in range(arrow.num_fields)], name, namespace)
    raise ValueError(f"column type {arrow} has no Avro form")


def _field_type(field: pa.Field, name: str, namespace: str) -> Any:
    avro = _avro_type(field.type, name, namespace)
    return ["null", avro] if field.nullable else avro


def _record(fields: list[pa.Field], name: str, namespace: str) -> dict:
    out = []
    for f in fields:
        entry: dict[str, Any] = {"name": f.name, "type": _field_type(f, f.name, f"{namespace}.{name}")}
        if f.nullable:
            entry["default"] = None
        out.append(entry)
    return {"type": "record", "name": name, "namespace": namespace, "fields": out}


def derived_schema(schema: pa.Schema, record_name: str) -> str:
    """The Avro schema of rows of ``schema``, a record named ``record_name`` (``namespace.Name`` allowed)."""
    namespace, _, name = record_name.rpartition(".")
    return json.dumps(_record(list(schema), name, namespace or "dagger"))


def fit_problems(avro_schema: str, schema: pa.Schema, where: str, others: set[str] = frozenset()) -> list[str]:
    """Why rows of ``schema`` cannot be written as records of ``avro_schema`` (empty when they can); columns in
    ``others`` (the record key's) may be left out of the schema."""
    from pyspark.sql.pandas.types import from_arrow_type

    from dagger.formats.avro.types import avro_struct  # start-up: loads pyspark

    wanted = avro_struct(avro_schema, where)
    problems = []
    names = set(schema.names)
    for field in wanted.fields:
        if field.name not in names:
            problems.append(f"{where}: the schema's field {field.name!r} has no output column of that name")
            continue
        column = schema.field(field.name)
        have = from_arrow_type(column.type)
        if have.simpleString() != field.dataType.simpleString():
            problems.append(
                f"{where}: column {field.name!r} is {have.simpleString()}, the schema's field is "
                f"{field.dataType.simpleString()} (cast it in the SQL)"
            )
    extra = [n for n in schema.names if n not in set(wanted.fieldNames()) and n not in others]
    if extra:
        problems.append(f"{where}: output column(s) {', '.join(extra)} are not in the schema")
    return problems


def avro_column(avro_schema: str) -> Any:
    """The JVM column of each row's Avro datum (Spark's ``to_avro``); null for a row with a null where the schema's
    field is not a union with null, which the sink then rejects (:func:`null_fields`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from dagger.formats.avro.types import avro_struct  # start-up: loads pyspark

    fields = avro_struct(avro_schema, "the Avro schema").fields
    value = to_avro(F.struct(*[F.col(f"`{f.name}`") for f in fields]), avro_schema)
    required = [F.col(f"`{f.name}`").isNotNull() for f in fields if not f.nullable]
    if not required:
        return value
    fits = required[0]
    for condition in required[1:]:
        fits = fits & condition
    return F.when(fits, value)


def null_fields(avro_schema: str, batch: pa.RecordBatch, rows: list[int]) -> str:
    """Why ``rows`` of ``batch`` have no datum: the non-null fields they hold a null for."""
    from dagger.formats.avro.types import avro_struct  # start-up: loads pyspark

    required = [f.name for f in avro_struct(avro_schema, "the Avro schema").fields if not f.nullable]
    names = sorted({n for n in required for r in rows if batch.column(n)[r].as_py() is None})
    return f"null in {', '.join(names)}, whose field in the Avro schema is not a union with null"
