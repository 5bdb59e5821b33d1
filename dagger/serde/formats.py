"""The built-in input data types (``INPUT_DATATYPE``) and their settings, as Dagger names them."""

from __future__ import annotations

from pydantic import Field

from dagger.registry.formats import InputFormatSettings, register_format


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
    """JSON records described by a JSON Schema. Not available yet: a stream with it is refused at start."""

    INPUT_SCHEMA_JSON_SCHEMA: str | None = Field(None, description="JSON Schema of the records.")
    INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME: str | None = Field(
        None, description="Field used as rowtime for JSON input."
    )


register_format("PROTO", ProtoSettings)
register_format("JSON", JsonSettings)
