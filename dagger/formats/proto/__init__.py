"""``INPUT_DATATYPE=PROTO``: Dagger's own records, protobuf messages of the descriptor sets
(``SCHEMA_REGISTRY_STENCIL_URLS``) or of a registry subject in Confluent's wire format.

The table's columns are the message's fields (:mod:`dagger.serde.types`); the Kafka reader decodes them with
ptars in its Python workers (:mod:`dagger.serde.decode`), or hands the records to Dagger's decoder in the JVM
(``ProtoRows``, :mod:`dagger.serde.proto_jvm`), which Spark's Kafka source uses too (real-time mode).
"""

from __future__ import annotations

from pydantic import Field

from dagger.formats.proto.reading import ProtoReading
from dagger.formats.proto.writing import ProtoWriting
from dagger.formats.records import RecordSettings
from dagger.plugins.format import register_format


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


class Proto(ProtoWriting, ProtoReading):
    """PROTO records: read by a stream (:mod:`~dagger.formats.proto.reading`), written by a sink
    (:mod:`~dagger.formats.proto.writing`)."""


register_format("PROTO", ProtoSettings, Proto)
