"""The built-in input data types (``INPUT_DATATYPE``) and their settings, as Dagger names them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field
from pyspark.sql.types import StructType

from dagger.plugins.format import InputFormatSettings, register_format
from dagger.serde.json_schema import JsonSchemaError, json_struct

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet


class ProtoSettings(InputFormatSettings):
    """Protobuf records: a message of the descriptor sets (`SCHEMA_REGISTRY_STENCIL_URLS`)."""

    INPUT_SCHEMA_PROTO_CLASS: str | None = Field(
        None, description="Fully qualified protobuf message name of the records, e.g. `pkg.BookingLogMessage`."
    )
    INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX: int | None = Field(
        None,
        description="Proto field *number* (not position) of the `google.protobuf.Timestamp` field that "
        "becomes the rowtime column.",
    )


class JsonSettings(InputFormatSettings):
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


register_format("PROTO", ProtoSettings)
register_format("JSON", JsonSettings)


def describe_records(stream: StreamConfig) -> str:
    """What a stream's records are, for logs: the message name, or ``JSON``."""
    if stream.INPUT_DATATYPE == "JSON":
        return "JSON"
    return stream.format.INPUT_SCHEMA_PROTO_CLASS or ""


def record_struct(stream: StreamConfig, descriptors: DescriptorSet) -> StructType:
    """The columns a stream's records have, before the validity flag and rowtime."""
    from dagger.serde.types import message_struct

    if stream.INPUT_DATATYPE == "JSON":
        return json_struct(stream.format.INPUT_SCHEMA_JSON_SCHEMA or "", _key(stream, "INPUT_SCHEMA_JSON_SCHEMA"))
    return message_struct(descriptors.find_message(stream.format.INPUT_SCHEMA_PROTO_CLASS))


def stream_table(stream: StreamConfig, descriptors: DescriptorSet, rowtime: str) -> StructType:
    """Every column of a stream's table: the records' columns, the validity flag, then rowtime."""
    from dagger.serde.types import input_table

    owner = "the JSON Schema" if stream.INPUT_DATATYPE == "JSON" else stream.format.INPUT_SCHEMA_PROTO_CLASS
    return input_table(record_struct(stream, descriptors), rowtime, f"{_key(stream, 'INPUT_DATATYPE')} ({owner})")


def check_records(stream: StreamConfig, descriptors: DescriptorSet) -> None:
    """Resolve a stream's record type and rowtime field before Spark starts (a config error names the key)."""
    from dagger.errors import DaggerConfigError
    from dagger.serde.json_decode import rowtime_type
    from dagger.serde.types import timestamp_field

    if stream.INPUT_DATATYPE == "JSON":
        for key in ("INPUT_SCHEMA_JSON_SCHEMA", "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME"):
            if not getattr(stream.format, key):
                raise DaggerConfigError(f"{_key(stream, key)} is required with INPUT_DATATYPE JSON")
        try:
            struct = record_struct(stream, descriptors)
            field = stream.format.INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME
            rowtime_type(struct, field, _key(stream, "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME"))
        except JsonSchemaError as exc:
            raise DaggerConfigError(str(exc)) from None
        return
    if stream.format.INPUT_SCHEMA_PROTO_CLASS:
        message = descriptors.find_message(stream.format.INPUT_SCHEMA_PROTO_CLASS)
        if stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX is not None:
            timestamp_field(
                message,
                stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX,
                _key(stream, "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"),
            )


def _key(stream: StreamConfig, key: str) -> str:
    return f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].{key}"
