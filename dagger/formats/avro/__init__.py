"""``INPUT_DATATYPE=AVRO`` (beyond Dagger): Avro records with a schema of their own, or in Confluent's wire format
with the subject's versions as writer schemas.

The Kafka reader only frames the records (:class:`~dagger.formats.avro.decode.AvroFrames`); Dagger's decoder in the JVM
(``AvroRows``, :func:`~dagger.formats.avro.decode.avro_table`) reads them into the table's columns.
"""

from __future__ import annotations

from pydantic import Field

from dagger.formats.avro.reading import AvroReading
from dagger.formats.avro.writing import AvroWriting
from dagger.formats.records import RecordSettings
from dagger.plugins.format import register_format


class AvroSettings(RecordSettings):
    """Beyond Dagger: Avro records, decoded by Spark's Avro reader, with a schema of their own or from the
    registry (`INPUT_SCHEMA_WIRE_FORMAT=confluent`)."""

    INPUT_SCHEMA_AVRO_SCHEMA: str | None = Field(
        None,
        description="With `plain`: the Avro schema of the records (each one bare binary datum), as its JSON, or "
        "a path, `file://` or http(s) URL of it. Its fields become the columns (docs/config.md#avro-types).",
    )


class Avro(AvroWriting, AvroReading):
    """AVRO records: read by a stream (:mod:`~dagger.formats.avro.reading`), written by a sink
    (:mod:`~dagger.formats.avro.writing`)."""


register_format("AVRO", AvroSettings, Avro)
