"""A JSON Schema (``INPUT_SCHEMA_JSON_SCHEMA``, ``SINK_KAFKA_JSON_SCHEMA``) as a Spark table schema.

The mapping is Flink's ``JsonRowSchemaConverter``'s, which Dagger uses, with Spark's types:

=======================================  ==========================================
JSON Schema                              column type
=======================================  ==========================================
``object`` with ``properties``           STRUCT of the properties, in their order
``array`` with ``items``                 ARRAY of the items' type
``string``                               STRING
``string`` with ``format: date-time``    TIMESTAMP (RFC 3339, e.g. ``2026-11-25T10:00:00Z``)
``string`` with ``format: date``         DATE
``integer``                              BIGINT
``number``                               DOUBLE
``boolean``                              BOOLEAN
=======================================  ==========================================

``"type": ["integer", "null"]`` is a nullable integer (every column is nullable); local references
(``"$ref": "#/definitions/Money"``, ``#/$defs/...``) are followed. Anything else (a free-form object, a union of two
types, ``oneOf``) is refused with the path of the property, because a column needs one type.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dagger.lenient_json import loads

_SIMPLE: dict[str, DataType] = {
    "string": StringType(),
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
}
_FORMATS: dict[str, DataType] = {"date-time": TimestampType(), "date": DateType()}


class JsonSchemaError(ValueError):
    """A JSON Schema this runner cannot turn into columns; the message names the property."""


def parse_schema(text: str | dict, where: str = "INPUT_SCHEMA_JSON_SCHEMA") -> dict:
    """The schema document of ``text`` (a JSON string, as Dagger's configs hold it, or an already parsed dict)."""
    if isinstance(text, dict):
        return text

    try:
        document, _ = loads(text)
    except ValueError as exc:
        raise JsonSchemaError(f"{where} is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise JsonSchemaError(f"{where} must be a JSON Schema object, got {type(document).__name__}")
    return document


def json_struct(schema: str | dict, where: str = "INPUT_SCHEMA_JSON_SCHEMA") -> StructType:
    """The columns of records described by ``schema``: the top-level object's properties."""
    document = parse_schema(schema, where)
    converted = _convert(document, document, where, ())
    if not isinstance(converted, StructType):
        raise JsonSchemaError(f'{where}: the records must be objects ("type": "object" with properties)')
    return converted


def _resolve(node: dict, root: dict, where: str, seen: tuple[str, ...]) -> tuple[dict, tuple[str, ...]]:
    while "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise JsonSchemaError(f"{where}: only local references (#/definitions/...) are supported, got {ref!r}")
        if ref in seen:
            raise JsonSchemaError(f"{where}: {ref} refers to itself; a recursive type has no column type")
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise JsonSchemaError(f"{where}: reference {ref} does not exist in the schema")
            target = target[part]
        if not isinstance(target, dict):
            raise JsonSchemaError(f"{where}: reference {ref} is not a schema")
        node, seen = target, (*seen, ref)
    return node, seen


def _type_name(node: dict, where: str) -> str:
    kind = node.get("type")
    if kind is None:
        if "properties" in node:
            return "object"
        if "items" in node:
            return "array"
        raise JsonSchemaError(f'{where} has no "type"; accepted: {", ".join([*_SIMPLE, "object", "array"])}')
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise JsonSchemaError(f'{where} has the types {kind}; a column needs one type (besides "null")')
        kind = kinds[0]
    return kind


def _convert(node: Any, root: dict, where: str, seen: tuple[str, ...]) -> DataType:
    if not isinstance(node, dict):
        raise JsonSchemaError(f"{where} is not a schema object: {json.dumps(node)[:80]}")
    node, seen = _resolve(node, root, where, seen)
    for combinator in ("oneOf", "anyOf", "allOf", "not"):
        if combinator in node:
            raise JsonSchemaError(f"{where} uses {combinator}; a column needs one type")
    kind = _type_name(node, where)
    if kind == "object":
        properties = node.get("properties")
        if not isinstance(properties, dict) or not properties:
            raise JsonSchemaError(
                f"{where} is an object without properties; declare its properties (a free-form object has no "
                "column type)"
            )
        return StructType(
            [
                StructField(name, _convert(child, root, f"{where}.{name}", seen), nullable=True)
                for name, child in properties.items()
            ]
        )
    if kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            raise JsonSchemaError(f'{where} is an array without one "items" schema')
        return ArrayType(_convert(items, root, f"{where}[]", seen), containsNull=True)
    if kind == "string" and node.get("format") in _FORMATS:
        return _FORMATS[node["format"]]
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    raise JsonSchemaError(f"{where} has type {kind!r}; accepted: {', '.join([*_SIMPLE, 'object', 'array'])}")


def json_schema_of(struct: StructType) -> dict:
    """The JSON Schema of records with the columns of ``struct`` (the inverse of :func:`json_struct`); columns with
    no JSON Schema type (maps, binary) are left out, so a reader ignores them."""
    properties = {}
    for field in struct.fields:
        node = _json_type(field.dataType)
        if node is not None:
            properties[field.name] = node
    return {"type": "object", "properties": properties}


def _json_type(kind: DataType) -> dict | None:
    if isinstance(kind, StructType):
        inner = json_schema_of(kind)
        return inner if inner["properties"] else None
    if isinstance(kind, ArrayType):
        items = _json_type(kind.elementType)
        return {"type": "array", "items": items} if items is not None else None
    if isinstance(kind, TimestampType):
        return {"type": "string", "format": "date-time"}
    if isinstance(kind, DateType):
        return {"type": "string", "format": "date"}
    name = kind.typeName()
    if name in ("byte", "short", "integer", "long"):
        return {"type": "integer"}
    if name in ("float", "double"):
        return {"type": "number"}
    if name in ("string", "boolean"):
        return {"type": name}
    return None
