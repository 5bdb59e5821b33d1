"""What the Kafka sink writes as one part of its records, the value or the key (:class:`RecordPart`): the data
type (protobuf, JSON, Avro), the wire format (bare, or Confluent's with a schema in the registry), the schema and
the output columns the part takes; and the encoding of a batch's rows into that part, column-wise.

Where each runs: :meth:`RecordPart.of`, :meth:`~RecordPart.check` and :meth:`~RecordPart.prepare` on the driver
when the job starts; :meth:`~RecordPart.encode` in the sink's writers, on the executors.

One module (~390 lines) because it is one concept, a part's encoding: its keys, its schema's three sources (looked
up, given, derived) and the three encoders (protobuf, JSON, and the JVM's Avro column), which share the checks.
"""

from __future__ import annotations

import base64
import decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dagger.errors import DaggerConfigError, SinkError
from dagger.formats.records import load_text
from dagger.plugins.sink import JVM_COLUMN_PREFIX
from dagger.schema.confluent import ConfluentSettings, register
from dagger.schema.descriptor_sets import build_pool
from dagger.serde.avro_encode import avro_column, derived_schema, fit_problems, null_fields
from dagger.serde.avro_types import avro_struct
from dagger.serde.confluent_header import header, message_path
from dagger.serde.json_schema import JsonSchemaError, json_struct
from dagger.serde.variant import is_json_text
from dagger.sinks.rejected import RowsRefused
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    from dagger.schema.descriptor_sets import DescriptorSet

_ENCODERS = BuiltCache(32)

#: the keys that set each part, by what they hold
KEYS = {
    "value": {
        "data_type": "SINK_KAFKA_DATA_TYPE",
        "wire_format": "SINK_KAFKA_WIRE_FORMAT",
        "message": "SINK_KAFKA_PROTO_MESSAGE",
        "subject": "SINK_KAFKA_SCHEMA_SUBJECT",
        "auto_register": "SINK_KAFKA_SCHEMA_AUTO_REGISTER",
        "record_name": "SINK_KAFKA_AVRO_RECORD_NAME",
        "avro_schema": "SINK_KAFKA_AVRO_SCHEMA",
        "json_schema": "SINK_KAFKA_JSON_SCHEMA",
    },
    "key": {
        "data_type": "SINK_KAFKA_KEY_DATA_TYPE",
        "wire_format": "SINK_KAFKA_KEY_WIRE_FORMAT",
        "message": "SINK_KAFKA_PROTO_KEY",
        "subject": "SINK_KAFKA_KEY_SCHEMA_SUBJECT",
        "auto_register": "SINK_KAFKA_KEY_SCHEMA_AUTO_REGISTER",
        "record_name": "SINK_KAFKA_KEY_AVRO_RECORD_NAME",
        "avro_schema": "SINK_KAFKA_KEY_AVRO_SCHEMA",
        "json_schema": "SINK_KAFKA_KEY_JSON_SCHEMA",
        "columns": "SINK_KAFKA_KEY_COLUMNS",
    },
}


@dataclass
class RecordPart:
    """One part of the sink's records: how it is encoded, and from which output columns."""

    part: str  # "value" or "key"
    data_type: str  # PROTO, JSON or AVRO
    confluent: bool  # Confluent's wire format (a registry's schema id in front of each record)
    subject: str | None = None
    auto_register: bool = False
    record_name: str = "dagger.Record"
    message: str | None = None  # PROTO: the message's full name
    columns: tuple[str, ...] | None = None  # the output columns it takes; None: all (PROTO: matched by name)
    avro_schema: str | None = None
    json_schema: str | None = None
    schema_id: int | None = None
    header: bytes | None = None  # Confluent's header in front of each record
    descriptor_set_b64: str = ""  # PROTO: the descriptor sets holding the message
    jvm_protobuf: bool = True  # PROTO: encoded in the JVM (SPARK_PROTOBUF_CODEC=jvm), when its classes are there

    def named(self, what: str) -> str:
        """The key that sets ``what`` of this part."""
        return KEYS[self.part][what]

    # -- driver side, at start ----------------------------------------------------------------------------

    @classmethod
    def of(cls, settings: Any, part: str, descriptors: DescriptorSet | None) -> RecordPart | None:
        """The ``part`` (value or key) a sink's settings describe, its schema looked up or loaded; None: the
        records have no key."""
        keys = KEYS[part]
        message = getattr(settings, keys["message"])
        if part == "key":
            if not settings.writes_keys:
                return None
            message = message or settings.SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS
            columns = [c.strip() for c in (settings.SINK_KAFKA_KEY_COLUMNS or "").split(",") if c.strip()]
            data_type = settings.SINK_KAFKA_KEY_DATA_TYPE or ("PROTO" if message else settings.SINK_KAFKA_DATA_TYPE)
        else:
            columns, data_type = [], settings.SINK_KAFKA_DATA_TYPE
        confluent, auto, subject, _ = settings.registry(part)
        out = cls(
            part,
            data_type,
            confluent,
            subject=subject if confluent else None,
            record_name=getattr(settings, keys["record_name"]),
            auto_register=auto,
            message=message if data_type == "PROTO" else None,
            columns=tuple(columns) or None,
            json_schema=getattr(settings, keys["json_schema"]) if data_type == "JSON" else None,
        )
        out._resolve(descriptors, getattr(settings, keys["avro_schema"]))
        return out

    def _resolve(self, descriptors: DescriptorSet | None, avro_schema: str | None) -> None:
        if self.data_type == "PROTO":
            if not self.message:
                also = " (the value's SINK_KAFKA_DATA_TYPE unless set)" if self.part == "key" else ""
                raise DaggerConfigError(
                    f"{self.named('data_type')}=PROTO{also} needs {self.named('message')}, the {self.part} message; "
                    f"or set {self.named('data_type')} to JSON or AVRO"
                )
            descriptors.find_message(self.message, self.named("message"))
            self.descriptor_set_b64 = base64.b64encode(descriptors.serialized).decode()
        if self.json_schema:
            try:
                json_shape(self.json_schema, self.named("json_schema"))  # unusable: a config error before start
            except JsonSchemaError as exc:
                raise DaggerConfigError(str(exc)) from None
        if not self.confluent:
            if self.data_type == "AVRO" and avro_schema:
                self.avro_schema = load_text(avro_schema, self.named("avro_schema"))
            return
        if self.auto_register:
            return
        from dagger.kafka.sink.registry import looked_up  # cycle: dagger.kafka.sink.registry import(s) this module

        schemas = looked_up(descriptors, self.subject, self.data_type, self.named("subject"))
        self.schema_id = schemas.reader_id
        path = None
        if self.data_type == "AVRO":
            self.avro_schema = schemas.avro_schema()
        elif self.data_type == "JSON":
            self.json_schema = self.json_schema or schemas.reader["schema"]
        else:
            path = message_path(schemas.file_descriptors()[-1], self.message)
            if path is None:
                raise DaggerConfigError(
                    f"{self.named('message')}: {self.message} is not a message of subject {self.subject!r}'s schema "
                    f"(id {self.schema_id}); register its file there, or set {self.named('auto_register')}=true"
                )
        self.header = header(self.schema_id, path)

    def _taken(self, schema: pa.Schema) -> pa.Schema | str:
        """The output columns this part takes (a schema), or why they cannot be had."""
        columns = self.columns
        if columns is None and self.part == "key" and self.data_type != "PROTO":
            if self.data_type == "AVRO" and self.avro_schema is not None and not self.auto_register:
                columns = tuple(avro_struct(self.avro_schema, "the key's Avro schema").fieldNames())
            elif self.json_schema:
                columns = tuple(json_shape(self.json_schema, self.named("json_schema")).schema.names)
            else:
                return (
                    f"{self.named('columns')}: name the output columns the key is made of ({', '.join(schema.names)})"
                )
        if columns is None:
            return schema
        missing = [c for c in columns if c not in schema.names]
        if missing:
            return f"{self.named('columns')}: {', '.join(missing)} not among the output columns ({', '.join(schema.names)})"
        self.columns = columns
        return pa.schema([schema.field(c) for c in columns])

    def check(self, schema: pa.Schema, key_columns: tuple[str, ...] = ()) -> list[str]:
        """Why the output (``schema``) cannot be written as this part (empty when it can); a schema to derive is
        derived now. ``key_columns``: the key's, which a value's fixed schema need not hold."""
        taken = self._taken(schema)
        if isinstance(taken, str):
            return [taken]
        if self.data_type == "AVRO":
            if self.avro_schema is None or (self.auto_register and self.schema_id is None):
                try:
                    self.avro_schema = derived_schema(taken, self.record_name)
                except ValueError as exc:
                    return [f"{self.named('data_type')}=AVRO: {exc}"]
                return []
            where = f"subject {self.subject!r}" if self.subject else self.named("avro_schema")
            return fit_problems(self.avro_schema, taken, where, set(key_columns))
        if self.data_type == "JSON":
            if self.confluent and self.auto_register and not self.json_schema:
                from dagger.kafka.sink.registry import (
                    json_schema_of,  # cycle: dagger.kafka.sink.registry import(s) this module
                )

                self.json_schema = json_schema_of(taken, self.record_name)
            picked = (
                json_shape(self.json_schema, self.named("json_schema")).columns(taken.names) if self.json_schema else []
            )
            return [picked] if isinstance(picked, str) else []
        encoder = _encoder(self.descriptor_set_b64, self.message, self.named("message"))
        problems = list(encoder.check(taken))
        if not encoder.mapped_columns(taken.names):
            problems.append(
                f"{self.named('message')}: no output column ({', '.join(taken.names)}) matches a field of "
                f"{self.message}; every record would be empty"
            )
        return problems

    def prepare(self, registry: dict[str, Any], offline: bool = False) -> None:
        """Auto-register: the part's schema is registered under its subject, and its id goes in the header.
        ``offline`` (``dagger test``): nothing is registered; the schema takes id 1."""
        if not self.confluent or not self.auto_register:
            return
        from dagger.kafka.sink.registry import register_proto  # cycle: dagger.kafka.sink.registry import(s) this module

        settings = ConfluentSettings(**registry)
        descriptor = None
        if self.data_type == "PROTO":
            from google.protobuf import descriptor_pb2

            fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(self.descriptor_set_b64))
            descriptor = build_pool(fds).FindMessageTypeByName(self.message)
        if offline:
            self.schema_id = 1
        elif self.data_type == "AVRO":
            self.schema_id = register(settings, self.subject, self.avro_schema, "AVRO")
        elif self.data_type == "JSON":
            self.schema_id = register(settings, self.subject, self.json_schema, "JSON")
        else:
            self.schema_id = register_proto(settings, self.subject, descriptor)
        path = message_path(descriptor.file.serialized_pb, self.message) if descriptor is not None else None
        self.header = header(self.schema_id, path)

    def jvm_column(self, schema: Any) -> Any:
        """The JVM column of each row's encoding, from the output columns (``schema``): AVRO, its datum (Spark's
        ``to_avro``); PROTO, a struct of its record and why it cannot be written (Dagger's encoder in the JVM,
        unless ``SPARK_PROTOBUF_CODEC=ptars`` or its classes are missing); None for the others."""
        if self.data_type == "PROTO" and self.jvm_protobuf:
            from pyspark.sql import SparkSession

            from dagger.serde.proto_jvm import jvm_codec_or_warn, proto_bytes  # start-up: loads numpy

            spark = SparkSession.getActiveSession()
            if spark is None or not jvm_codec_or_warn(spark):
                self.jvm_protobuf = False
                return None
            descriptor_set = base64.b64decode(self.descriptor_set_b64)
            return proto_bytes(
                spark, schema, descriptor_set, self.message, self.header, self.named("message"), self.columns
            )
        if self.data_type != "AVRO":
            return None

        return avro_column(self.avro_schema)

    def describe(self) -> str:
        what = self.message if self.data_type == "PROTO" else self.data_type
        of = f" of {', '.join(self.columns)}" if self.columns and self.part == "key" else ""
        return f"{what}{of}" + (f" (subject {self.subject})" if self.subject else "")

    # -- executor side ------------------------------------------------------------------------------------

    def encode(self, batch: pa.RecordBatch, jvm_column: str) -> pa.BinaryArray:
        """The part of each row of ``batch`` (the output and the sink's JVM columns); ``jvm_column``: the name of
        this part's JVM column. A row that cannot be encoded refuses the batch (:class:`RowsRefused`)."""
        if self.data_type == "AVRO":
            values = batch.column(jvm_column)
            if values.null_count:
                rows = [int(i) for i in pc.indices_nonzero(pc.is_null(values)).to_pylist()]
                reason = null_fields(self.avro_schema, batch, rows)
                raise RowsRefused("INVALID_MESSAGE_ERROR", reason if self.part == "value" else f"key: {reason}", rows)
            return framed(values, self.header)
        if self.data_type == "PROTO" and jvm_column in batch.schema.names:
            encoded = batch.column(jvm_column)
            errors = encoded.field("error")
            if errors.null_count < len(errors):
                from dagger.serde.proto_jvm import refused_rows  # start-up: loads numpy

                reason, rows = refused_rows(errors)
                raise RowsRefused("INVALID_MESSAGE_ERROR", reason if self.part == "value" else f"key: {reason}", rows)
            return encoded.field("value")  # Confluent's header in front, where it has one
        names = [n for n in batch.schema.names if not n.startswith(JVM_COLUMN_PREFIX)]
        taken = list(self.columns) if self.columns is not None else names
        if taken != batch.schema.names:
            batch = pa.RecordBatch.from_arrays([batch.column(n) for n in taken], names=taken)
        if self.data_type == "JSON":
            if self.json_schema:
                batch = json_shape(self.json_schema, self.named("json_schema")).shape(batch)
            return framed(pa.array(json_lines(batch), pa.binary()), self.header)
        try:
            values = _encoder(self.descriptor_set_b64, self.message, self.named("message")).encode(batch)
        except SinkError as exc:  # a value the message cannot take: find the rows, reject only them
            raise RowsRefused("INVALID_MESSAGE_ERROR", str(exc)) from None
        return framed(values, self.header)


def framed(values: pa.BinaryArray, header: bytes | None) -> pa.BinaryArray:
    """``values`` behind Confluent's header (as they are without one), column-wise."""
    if header is None:
        return values
    return pc.binary_join_element_wise(pa.scalar(header, pa.binary()), values, pa.scalar(b"", pa.binary()))


def _encoder(descriptor_set_b64: str, message: str, key: str) -> Any:
    """One encoder per (descriptor set, message) per Python worker."""

    def build() -> Any:
        from google.protobuf import descriptor_pb2

        from dagger.serde.encode import ProtoEncoder  # start-up: loads numpy

        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(descriptor_set_b64))
        return ProtoEncoder(build_pool(fds).FindMessageTypeByName(message), key)

    return _ENCODERS.get(content_key(message, key, descriptor_set_b64), build)


def json_shape(schema: str, key: str = "SINK_KAFKA_JSON_SCHEMA") -> JsonShape:
    """One :class:`JsonShape` per JSON Schema per Python worker."""
    return _ENCODERS.get(content_key("json-schema", key, schema), lambda: JsonShape(schema, key))


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
