"""``INPUT_DATATYPE=JSON``: one JSON object per record, described by a JSON Schema, as Dagger reads them (plain, or in
Confluent's wire format with the subject's schema).

The Kafka reader decodes them column-wise with Arrow's JSON reader (:mod:`dagger.formats.json.decode`); Spark's Kafka
source with ``from_json`` in the JVM (plain records only).
"""

from __future__ import annotations

from pydantic import Field

from dagger.formats.json.reading import JsonReading
from dagger.formats.json.writing import JsonWriting
from dagger.formats.records import RecordSettings
from dagger.plugins.format import register_format


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


class Json(JsonWriting, JsonReading):
    """JSON records: read by a stream (:mod:`~dagger.formats.json.reading`), written by a sink
    (:mod:`~dagger.formats.json.writing`)."""


register_format("JSON", JsonSettings, Json)
