"""The built-in input data types (``INPUT_DATATYPE``) and their settings, as Dagger names them, and beyond Dagger:
Avro, and Confluent's wire format with a schema registry for all three."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field
from pyspark.sql.types import StructType

from dagger.errors import DaggerConfigError
from dagger.plugins.format import InputFormatSettings, register_format
from dagger.serde.avro_types import AvroSchemaError, avro_struct
from dagger.serde.json_schema import JsonSchemaError, json_struct

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet


class RecordSettings(InputFormatSettings):
    """The keys every input data type has: how records are framed, and the registry subject they name."""

    INPUT_SCHEMA_WIRE_FORMAT: Literal["plain", "confluent"] = Field(
        "plain",
        description="Beyond Dagger: `plain`, each record is the bare message (Dagger's format); `confluent`, "
        "Confluent's wire format: magic byte 0, the 4-byte schema id (for protobuf, the message-index array), "
        "then the message, with schemas in the registry at `SCHEMA_REGISTRY_CONFLUENT_URL`.",
    )
    INPUT_SCHEMA_SUBJECT: str | None = Field(
        None,
        description="The registry subject whose latest version, when the job starts, is the reader schema (the "
        "table's columns); by default `<topic>-value` (TopicNameStrategy). Only with `confluent`.",
    )
    INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME: str | None = Field(
        None,
        description="The field that becomes rowtime, by name, for every data type (a timestamp: Avro "
        "`timestamp-millis`/`-micros`, protobuf `google.protobuf.Timestamp`, JSON `date-time`).",
    )


class ProtoSettings(RecordSettings):
    """Protobuf records: a message of the descriptor sets (`SCHEMA_REGISTRY_STENCIL_URLS`), or of the registry's
    subject (`INPUT_SCHEMA_WIRE_FORMAT=confluent`)."""

    INPUT_SCHEMA_PROTO_CLASS: str | None = Field(
        None,
        description="Fully qualified protobuf message name of the records, e.g. `pkg.BookingLogMessage`. With "
        "`confluent`, by default the first message of the subject's file.",
    )
    INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX: int | None = Field(
        None,
        description="Proto field *number* (not position) of the `google.protobuf.Timestamp` field that "
        "becomes the rowtime column.",
    )


class JsonSettings(RecordSettings):
    """JSON records (one object per Kafka record) described by a JSON Schema, as Dagger reads them."""

    INPUT_SCHEMA_JSON_SCHEMA: str | None = Field(
        None,
        description="JSON Schema of the records (a JSON string, as in Dagger). Its properties become the table's "
        "columns: object → STRUCT, array → ARRAY, integer → BIGINT, number → DOUBLE, boolean → BOOLEAN, string → "
        "STRING, `format: date-time` → TIMESTAMP, `format: date` → DATE; local `$ref`s are followed. Properties "
        "a record has and the schema lacks are ignored; a value of the wrong type makes the record invalid "
        "(`SOURCE_KAFKA_INVALID_RECORD_POLICY`).",
    )
    INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME: str | None = Field(
        None,
        description="Top-level property that becomes rowtime: a `date-time` string (RFC 3339) or a number of "
        "epoch seconds. A record without it is invalid.",
    )


class AvroSettings(RecordSettings):
    """Beyond Dagger: Avro records, decoded by Spark's Avro reader, with a schema of their own or from the
    registry (`INPUT_SCHEMA_WIRE_FORMAT=confluent`)."""

    INPUT_SCHEMA_AVRO_SCHEMA: str | None = Field(
        None,
        description="With `plain`: the Avro schema of the records (each one bare binary datum), as its JSON, or "
        "a path, `file://` or http(s) URL of it. Its fields become the columns (docs/config.md#avro-types).",
    )


register_format("PROTO", ProtoSettings)
register_format("JSON", JsonSettings)
register_format("AVRO", AvroSettings)


def describe_records(stream: StreamConfig) -> str:
    """What a stream's records are, for logs: the message name, ``JSON`` or ``AVRO`` (with the subject)."""
    subject = stream_subject(stream)
    if stream.INPUT_DATATYPE in ("JSON", "AVRO"):
        return f"{stream.INPUT_DATATYPE} ({subject[0]})" if subject else stream.INPUT_DATATYPE
    return stream.format.INPUT_SCHEMA_PROTO_CLASS or (f"PROTO ({subject[0]})" if subject else "")


def stream_subject(stream: StreamConfig) -> tuple[str, str] | None:
    """``(subject, the key that names it)`` of a stream in Confluent's wire format; None for a plain one."""

    if getattr(stream.format, "INPUT_SCHEMA_WIRE_FORMAT", "plain") != "confluent":
        return None
    if stream.format.INPUT_SCHEMA_SUBJECT:
        return stream.format.INPUT_SCHEMA_SUBJECT, _key(stream, "INPUT_SCHEMA_SUBJECT")
    topics = getattr(stream.settings, "SOURCE_KAFKA_TOPIC_NAMES", None)
    if not topics or not re.fullmatch(r"[A-Za-z0-9._-]+", topics):
        raise DaggerConfigError(
            f"{_key(stream, 'INPUT_SCHEMA_SUBJECT')} is required: the stream reads {topics!r}, not one topic, so "
            "the subject cannot be <topic>-value"
        )
    return f"{topics}-value", f"{_key(stream, 'SOURCE_KAFKA_TOPIC_NAMES')} (subject <topic>-value)"


def avro_schemas(stream: StreamConfig, descriptors: DescriptorSet) -> tuple[str, dict[int, str]]:
    """An Avro stream's reader schema and its writer schemas by id (a plain stream: its schema, id 0)."""
    subject = stream_subject(stream)
    if subject is None:
        text = load_text(stream.format.INPUT_SCHEMA_AVRO_SCHEMA or "", _key(stream, "INPUT_SCHEMA_AVRO_SCHEMA"))
        return text, {0: text}
    schemas = registered(stream, descriptors, "AVRO")
    return schemas.avro_schema(), {i: schemas.avro_schema(i) for i in schemas.schemas}


def registered(stream: StreamConfig, descriptors: DescriptorSet, schema_type: str):  # noqa: ANN201
    """The :class:`~dagger.schema.confluent.SubjectSchemas` a stream reads, checked to hold ``schema_type``."""

    subject, where = stream_subject(stream)
    schemas = descriptors.subjects.get(subject)
    if schemas is None:
        raise DaggerConfigError(f"{where}: subject {subject!r} was not read from the registry")
    if schemas.schema_type != schema_type:
        raise DaggerConfigError(
            f"{where}: subject {subject!r} holds {schemas.schema_type} schemas, but "
            f"{_key(stream, 'INPUT_DATATYPE')} is {stream.INPUT_DATATYPE}"
        )
    return schemas


def proto_message(stream: StreamConfig, descriptors: DescriptorSet) -> str | None:
    """The message a PROTO stream reads: ``INPUT_SCHEMA_PROTO_CLASS``, else (Confluent's format) the first
    message of the subject's file, as a record's ``[0]`` index names it."""
    if stream.format.INPUT_SCHEMA_PROTO_CLASS or stream_subject(stream) is None:
        return stream.format.INPUT_SCHEMA_PROTO_CLASS
    from dagger.serde.confluent_decode import message_at  # start-up: loads numpy, pyarrow

    return message_at(registered(stream, descriptors, "PROTOBUF").file_descriptors()[-1], (0,))


def json_schema(stream: StreamConfig, descriptors: DescriptorSet) -> str:
    """A JSON stream's JSON Schema: ``INPUT_SCHEMA_JSON_SCHEMA``, or the subject's latest version."""
    if stream_subject(stream) is None:
        return stream.format.INPUT_SCHEMA_JSON_SCHEMA or ""
    return registered(stream, descriptors, "JSON").reader["schema"]


def rowtime_field_number(stream: StreamConfig, descriptors: DescriptorSet) -> int | None:
    """A PROTO stream's rowtime field number: ``INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX``, or the number of the
    field ``INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME`` names."""

    if stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX is not None or not rowtime_field(stream):
        return stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX
    message = descriptors.find_message(proto_message(stream, descriptors))
    field = message.fields_by_name.get(rowtime_field(stream))
    if field is None:
        raise DaggerConfigError(
            f"{_key(stream, 'INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME')}: {message.full_name} has no field "
            f"{rowtime_field(stream)!r}; its fields: {', '.join(f.name for f in message.fields)}"
        )
    return field.number


_TEXTS: dict[str, str] = {}


def load_text(value: str, where: str) -> str:
    """A schema given inline (``{...}``), or by path, ``file://`` or http(s) URL; read once per process."""

    value = value.strip()
    if not value:
        raise DaggerConfigError(f"{where} is required")
    if value.startswith(("{", "[")):
        return value
    if value not in _TEXTS:
        try:
            if value.startswith(("http://", "https://")):
                import requests

                answer = requests.get(value, timeout=10)
                answer.raise_for_status()
                _TEXTS[value] = answer.text
            else:
                _TEXTS[value] = Path(value.removeprefix("file://")).read_text()
        except Exception as exc:  # noqa: BLE001 - any failure to read it is the same config error
            raise DaggerConfigError(f"{where}: cannot read {value}: {exc}") from None
    return _TEXTS[value]


def record_struct(stream: StreamConfig, descriptors: DescriptorSet) -> StructType:
    """The columns a stream's records have, before the validity flag and rowtime."""
    from dagger.serde.types import message_struct  # start-up: loads google

    if stream.INPUT_DATATYPE == "JSON":
        return json_struct(json_schema(stream, descriptors), _key(stream, "INPUT_SCHEMA_JSON_SCHEMA"))
    if stream.INPUT_DATATYPE == "AVRO":
        try:
            return avro_struct(avro_schemas(stream, descriptors)[0], _key(stream, "INPUT_SCHEMA_AVRO_SCHEMA"))
        except AvroSchemaError as exc:
            raise DaggerConfigError(str(exc)) from None
    return message_struct(descriptors.find_message(proto_message(stream, descriptors)))


def stream_table(stream: StreamConfig, descriptors: DescriptorSet, rowtime: str) -> StructType:
    """Every column of a stream's table: the records' columns, the validity flag, then rowtime."""
    from dagger.serde.types import input_table  # start-up: loads google

    owners = {"JSON": "the JSON Schema", "AVRO": "the Avro schema"}
    owner = owners.get(stream.INPUT_DATATYPE) or proto_message(stream, descriptors)
    return input_table(record_struct(stream, descriptors), rowtime, f"{_key(stream, 'INPUT_DATATYPE')} ({owner})")


def rowtime_field(stream: StreamConfig) -> str | None:
    """The field that becomes rowtime, by name (None: by index, protobuf's, or none)."""
    if stream.INPUT_DATATYPE == "JSON":
        return (
            stream.format.INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME
            or stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME
        )
    return stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME


def check_records(stream: StreamConfig, descriptors: DescriptorSet) -> None:
    """Resolve a stream's record type and rowtime field before Spark starts (a config error names the key)."""
    from dagger.serde.json_decode import rowtime_type  # start-up: loads google, numpy, pyarrow
    from dagger.serde.types import timestamp_field  # start-up: loads google

    if stream.INPUT_DATATYPE == "JSON":
        keys = ["INPUT_SCHEMA_JSON_SCHEMA"] if stream_subject(stream) is None else []
        for key in keys:
            if not getattr(stream.format, key):
                raise DaggerConfigError(f"{_key(stream, key)} is required with INPUT_DATATYPE JSON")
        if not rowtime_field(stream):
            key = _key(stream, "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME")
            raise DaggerConfigError(f"{key} is required with INPUT_DATATYPE JSON")
        try:
            struct = record_struct(stream, descriptors)
            field = rowtime_field(stream)
            rowtime_type(struct, field, _key(stream, "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME"))
        except JsonSchemaError as exc:
            raise DaggerConfigError(str(exc)) from None
        return
    if stream.INPUT_DATATYPE == "AVRO":
        struct = record_struct(stream, descriptors)
        field = rowtime_field(stream)
        key = _key(stream, "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME")
        if field is None:
            raise DaggerConfigError(f"{key} is required with INPUT_DATATYPE AVRO: the field that becomes rowtime")
        if field not in struct.fieldNames():
            raise DaggerConfigError(
                f"{key}: the Avro schema has no field {field!r}; its fields: {', '.join(struct.fieldNames())}"
            )
        if struct[field].dataType.typeName() not in ("timestamp", "timestamp_ntz"):
            raise DaggerConfigError(
                f"{key}: field {field!r} is {struct[field].dataType.simpleString()}; the rowtime must be a "
                "timestamp (logicalType timestamp-millis or timestamp-micros)"
            )
        return
    name = proto_message(stream, descriptors)
    if name:
        message = descriptors.find_message(name)
        number = rowtime_field_number(stream, descriptors)
        if number is not None:
            timestamp_field(message, number, _key(stream, "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"))


def _key(stream: StreamConfig, key: str) -> str:
    return f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].{key}"
