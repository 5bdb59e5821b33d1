"""Avro schema → Spark types, as Spark's Avro reader (``from_avro``, spark-avro's ``SchemaConverters``) maps them.

==========================================  ==============================================================
Avro                                        Spark
==========================================  ==============================================================
``record``                                  ``STRUCT`` (its fields in order)
``array``                                   ``ARRAY``
``map``                                     ``MAP<STRING, …>``
``["null", T]`` (either order)              ``T``, nullable
``["null", int, long]``, ``[float, double]`` ``BIGINT``, ``DOUBLE`` (numeric unions widen)
any other union                             ``STRUCT<member0, member1, …>``: the branch a value took is set
``enum``                                    ``STRING`` (the symbol)
``fixed``, ``bytes``                        ``BINARY``
``boolean``/``int``/``long``                ``BOOLEAN``/``INT``/``BIGINT``
``float``/``double``/``string``             ``FLOAT``/``DOUBLE``/``STRING``
``decimal`` (bytes or fixed)                ``DECIMAL(precision, scale)``
``date``                                    ``DATE``
``timestamp-millis``/``-micros``            ``TIMESTAMP``
``local-timestamp-millis``/``-micros``      ``TIMESTAMP_NTZ``
``time-millis``                             ``INT`` (milliseconds of the day)
``time-micros``                             ``TIME(6)``
``uuid``                                    ``STRING``
==========================================  ==============================================================

A field is nullable when its type is a union with ``null``. A record that contains itself cannot be a table.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    TimeType,
)


class AvroSchemaError(ValueError):
    """An Avro schema that is not JSON, not a schema, or not a table."""


_PRIMITIVE: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
    "null": NullType(),
}


def parse_avro(text: str | dict, where: str) -> dict:
    """An Avro schema's JSON (a record), checked by fastavro (named types resolved)."""
    import fastavro

    try:
        schema = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise AvroSchemaError(f"{where}: not JSON ({exc})") from None
    try:
        fastavro.parse_schema(schema)
    except Exception as exc:  # noqa: BLE001 - fastavro raises several kinds: name what it said
        raise AvroSchemaError(f"{where}: not an Avro schema: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise AvroSchemaError(f"{where}: the schema must be an Avro record, whose fields become the columns")
    return schema


def avro_struct(text: str | dict, where: str) -> StructType:
    """The columns of records of Avro schema ``text``."""
    schema = parse_avro(text, where)
    struct, _ = _convert(schema, {}, schema.get("namespace"), where, ())
    return struct


def _convert(schema: Any, named: dict[str, Any], namespace: str | None, where: str, stack: tuple) -> tuple[Any, bool]:
    """``(Spark type, nullable)`` of an Avro schema; ``named`` collects the named types met so far."""
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema], schema == "null"
        full = schema if "." in schema or namespace is None else f"{namespace}.{schema}"
        found = named.get(full, named.get(schema))
        if found is None:
            raise AvroSchemaError(f"{where}: unknown type {schema!r}")
        if found.get("type") == "record" and full in stack:
            raise AvroSchemaError(f"{where}: record {full} contains itself, which a table cannot hold")
        return _convert(found, named, namespace, where, stack)
    if isinstance(schema, list):
        return _union(schema, named, namespace, where, stack)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if kind in ("record", "enum", "fixed"):
        name = schema["name"]
        space = schema.get("namespace", namespace)
        full = name if "." in name or not space else f"{space}.{name}"
        named[full] = schema
        if kind == "record":
            fields = []
            for f in schema.get("fields", []):
                dtype, nullable = _convert(f["type"], named, space, where, (*stack, full))
                fields.append(StructField(f["name"], dtype, nullable))
            return StructType(fields), False
        if kind == "enum":
            return StringType(), False
        if logical == "decimal":
            return DecimalType(schema["precision"], schema.get("scale", 0)), False
        return BinaryType(), False
    if kind == "array":
        item, nullable = _convert(schema["items"], named, namespace, where, stack)
        return ArrayType(item, nullable), False
    if kind == "map":
        value, nullable = _convert(schema["values"], named, namespace, where, stack)
        return MapType(StringType(), value, nullable), False
    if kind in _PRIMITIVE:
        if logical == "decimal" and kind == "bytes":
            return DecimalType(schema["precision"], schema.get("scale", 0)), False
        if logical == "date" and kind == "int":
            return DateType(), False
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TimestampType(), False
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return TimestampNTZType(), False
        if logical == "time-micros" and kind == "long":
            return TimeType(6), False
        return _PRIMITIVE[kind], kind == "null"
    if isinstance(kind, (dict, list)):
        return _convert(kind, named, namespace, where, stack)
    return _convert(kind, named, namespace, where, stack)


def _union(branches: list, named: dict, namespace: str | None, where: str, stack: tuple) -> tuple[DataType, bool]:
    others = [b for b in branches if b != "null"]
    nullable = len(others) < len(branches)
    if not others:
        return NullType(), True
    if len(others) == 1:
        dtype, _ = _convert(others[0], named, namespace, where, stack)
        return dtype, nullable
    converted = [_convert(b, named, namespace, where, stack)[0] for b in others]
    kinds = {type(t) for t in converted}
    if kinds <= {IntegerType, LongType}:
        return LongType(), nullable
    if kinds <= {FloatType, DoubleType}:
        return DoubleType(), nullable
    return StructType([StructField(f"member{i}", t, True) for i, t in enumerate(converted)]), nullable
