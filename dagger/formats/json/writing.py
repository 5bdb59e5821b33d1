"""How a sink writes JSON records: one compact object per row (:func:`json_lines`), shaped by a JSON Schema when one
is given (:class:`JsonShape`, Dagger's ``SINK_KAFKA_JSON_SCHEMA``); ``to_json`` in the JVM for Spark's Kafka sink
(the writing half of :class:`dagger.formats.json.Json`)."""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dagger.errors import DaggerConfigError, SinkError
from dagger.formats.json.schema import JsonSchemaError, json_struct
from dagger.schema.confluent import register
from dagger.serde.confluent_header import framed
from dagger.serde.variant import is_json_text
from dagger.session.pandas_free import lit
from dagger.sinks.rejected import RowsRefused
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.schema.descriptor_sets import DescriptorSet

_SHAPES = BuiltCache(32)


class JsonWriting:
    """JSON records as a sink's record part (the Kafka sink's value or key)."""

    writes = True
    registry_type = "JSON"
    part_keys = ("json_schema", "record_name")

    def resolve_part(self, part: Any, descriptors: DescriptorSet | None, schema_text: str | None) -> None:
        if part.json_schema:
            try:
                json_shape(part.json_schema, part.named("json_schema"))  # unusable: a config error before start
            except JsonSchemaError as exc:
                raise DaggerConfigError(str(exc)) from None

    def registered_part(self, part: Any, schemas: Any) -> tuple[int, ...] | None:
        part.json_schema = part.json_schema or schemas.reader["schema"]
        return None

    def key_columns(self, part: Any) -> tuple[str, ...] | None:
        if part.json_schema:
            return tuple(json_shape(part.json_schema, part.named("json_schema")).schema.names)
        return None

    def check_part(self, part: Any, taken: pa.Schema, key_columns: tuple[str, ...]) -> list[str]:
        if part.confluent and part.auto_register and not part.json_schema:
            part.json_schema = json_schema_of(taken, part.record_name)
        picked = (
            json_shape(part.json_schema, part.named("json_schema")).columns(taken.names) if part.json_schema else []
        )
        return [picked] if isinstance(picked, str) else []

    def register_part(self, part: Any, registry: Any, offline: bool) -> tuple[int, tuple[int, ...] | None]:
        return (1 if offline else register(registry, part.subject, part.json_schema, "JSON")), None

    def encode_part(self, part: Any, batch: pa.RecordBatch, jvm_column: str) -> pa.BinaryArray:
        batch = part.taken(batch)
        if part.json_schema:
            batch = json_shape(part.json_schema, part.named("json_schema")).shape(batch)
        return framed(pa.array(json_lines(batch), pa.binary()), part.header)

    def part_reader(self, part: Any) -> Callable[[bytes], dict[str, Any]]:
        return lambda body: json.loads(body)

    def part_writer(self, part: Any) -> Callable[[dict[str, Any]], bytes]:
        return lambda record: json.dumps(record).encode()

    def spark_sink_refusal(
        self, key: str, jvm_protobuf: bool, protobuf_only: bool, real_time: bool = False
    ) -> str | None:
        return f"{key}=JSON (auto takes protobuf sinks only)" if protobuf_only and not real_time else None

    def spark_part(self, part: Any, df: DataFrame, sink_name: str, real_time: bool) -> Any:
        """``to_json`` of the row's columns."""
        from pyspark.sql import functions as F

        names = list(part.columns) if part.columns is not None else df.columns
        text = F.to_json(F.struct(*[F.col(f"`{c}`") for c in names])).cast("binary")
        return F.concat(lit(part.header), text) if part.header else text


def json_shape(schema: str, key: str = "SINK_KAFKA_JSON_SCHEMA") -> JsonShape:
    """One :class:`JsonShape` per JSON Schema per Python worker."""
    return _SHAPES.get(content_key("json-schema", key, schema), lambda: JsonShape(schema, key))


class JsonShape:
    """Rows shaped by a JSON Schema (``SINK_KAFKA_JSON_SCHEMA``): its top-level properties, in order, with their
    types."""

    def __init__(self, schema: str, key: str = "SINK_KAFKA_JSON_SCHEMA"):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.key = key
        self.schema = to_arrow_schema(json_struct(schema, key), timezone="UTC")

    def columns(self, names: list[str]) -> list[int] | str:
        """The output column (index) of each property, or why the output cannot be shaped."""
        if all(p in names for p in self.schema.names):
            return [names.index(p) for p in self.schema.names]
        if len(names) == len(self.schema.names):
            return list(range(len(names)))  # as Dagger: the i-th column is the i-th property
        missing = [p for p in self.schema.names if p not in names]
        return (
            f"{self.key}: properties {', '.join(missing)} match no output column "
            f"({', '.join(names)}), and the schema has {len(self.schema.names)} properties for {len(names)} "
            "columns (with as many, they are matched by position)"
        )

    def shape(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` as the schema's objects; a value that does not convert refuses the batch (the writer then
        finds and rejects its rows)."""
        picked = self.columns(batch.schema.names)
        if isinstance(picked, str):
            raise SinkError(picked)
        columns = []
        for target, index in zip(self.schema, picked, strict=True):
            column = batch.column(index)
            try:
                columns.append(column if column.type == target.type else column.cast(target.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise RowsRefused(
                    "INVALID_MESSAGE_ERROR",
                    f"column {batch.schema.names[index]} ({column.type}) cannot be written as {target.name} "
                    f"({target.type}) of {self.key}: {exc}",
                ) from None
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def json_lines(batch: pa.RecordBatch) -> list[bytes]:
    """One compact JSON object per row, numbers at full precision.

    Doubles are written in their shortest form that reads back to the same double (orjson), floats in the
    shortest form that reads back to the same float (``1.1``, not ``1.100000023841858``), whole decimals as
    integers and other decimals exactly; timestamps as ISO-8601 UTC with microseconds (``...T03:04:05.123456Z``),
    binary as text, maps as ``[key, value]`` pairs.
    """

    columns = {}
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if is_json_text(field):  # an untyped lookup output of objects or mixed types: its JSON as is
            columns[field.name] = [None if v is None else orjson.Fragment(v) for v in column.to_pylist()]
        else:
            columns[field.name] = _json_ready(column).to_pylist()
    names = list(columns)
    values = [columns[n] for n in names]
    dumps, default, utc = orjson.dumps, _json_default, orjson.OPT_UTC_Z  # nested timestamps: ...Z as well
    return [dumps(dict(zip(names, row, strict=True)), default=default, option=utc) for row in zip(*values, strict=True)]


def _json_ready(column: pa.Array) -> pa.Array:
    """Columns whose Python values orjson would print differently from what the sink promises, converted."""
    t = column.type
    if pa.types.is_float32(t):  # the float's own shortest digits, as a double
        return pc.cast(pc.cast(column, pa.string()), pa.float64())
    if pa.types.is_timestamp(t):
        utc = column.cast(pa.timestamp("us", tz="UTC"))
        return pc.strftime(utc, format="%Y-%m-%dT%H:%M:%SZ")  # %S carries the microseconds
    return column


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else orjson.Fragment(str(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def json_schema_of(schema: pa.Schema, title: str) -> str:
    """A JSON Schema of rows of ``schema`` as the sink writes them (``json_lines``), for auto-register."""
    properties = {f.name: _json_type(f) for f in schema}
    return json.dumps({"title": title, "type": "object", "properties": properties})


def _json_type(field: pa.Field) -> dict:
    kind = field.type
    if pa.types.is_boolean(kind):
        out: dict = {"type": "boolean"}
    elif pa.types.is_integer(kind):
        out = {"type": "integer"}
    elif pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        out = {"type": "number"}
    elif pa.types.is_timestamp(kind):
        out = {"type": "string", "format": "date-time"}
    elif pa.types.is_date(kind):
        out = {"type": "string", "format": "date"}
    elif pa.types.is_struct(kind):
        out = {
            "type": "object",
            "properties": {kind.field(i).name: _json_type(kind.field(i)) for i in range(kind.num_fields)},
        }
    elif pa.types.is_map(kind):
        out = {"type": "array", "items": {"type": "array"}}  # [key, value] pairs, as json_lines writes maps
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        out = {"type": "array", "items": _json_type(kind.value_field)}
    else:
        out = {"type": "string"}
    if field.nullable:
        out["type"] = [out["type"], "null"]
    return out
