"""What every built-in input data type shares: how records are framed (plain, or Confluent's wire format with a
registry subject), the field that becomes rowtime by name, the subject a stream reads, and schemas given by text,
path or URL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.plugins.format import InputFormatSettings
from dagger.plugins.source import source_of

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.schema.confluent import SubjectSchemas
    from dagger.schema.descriptor_sets import DescriptorSet


class RecordSettings(InputFormatSettings):
    """The keys every built-in input data type has: how records are framed, and the registry subject they name."""

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


def key_of(stream: StreamConfig, key: str) -> str:
    """A stream's key as messages name it: ``STREAMS[table].KEY``."""
    return f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].{key}"


def stream_subject(stream: StreamConfig) -> tuple[str, str] | None:
    """``(subject, the key that names it)`` of a stream in Confluent's wire format; None for a plain one (or a
    format without Confluent's framing)."""

    if getattr(stream.format, "INPUT_SCHEMA_WIRE_FORMAT", "plain") != "confluent":
        return None
    if stream.format.INPUT_SCHEMA_SUBJECT:
        return stream.format.INPUT_SCHEMA_SUBJECT, key_of(stream, "INPUT_SCHEMA_SUBJECT")
    topics = source_of(stream).topics(stream)
    if not topics or not re.fullmatch(r"[A-Za-z0-9._-]+", topics):
        raise DaggerConfigError(
            f"{key_of(stream, 'INPUT_SCHEMA_SUBJECT')} is required: the stream reads {topics!r}, not one topic, so "
            "the subject cannot be <topic>-value"
        )
    return f"{topics}-value", f"{key_of(stream, 'SOURCE_KAFKA_TOPIC_NAMES')} (subject <topic>-value)"


def registered(stream: StreamConfig, descriptors: DescriptorSet, schema_type: str) -> SubjectSchemas:
    """The schemas of the subject a stream reads, checked to hold ``schema_type``."""

    subject, where = stream_subject(stream)
    schemas = descriptors.subjects.get(subject)
    if schemas is None:
        raise DaggerConfigError(f"{where}: subject {subject!r} was not read from the registry")
    if schemas.schema_type != schema_type:
        raise DaggerConfigError(
            f"{where}: subject {subject!r} holds {schemas.schema_type} schemas, but "
            f"{key_of(stream, 'INPUT_DATATYPE')} is {stream.INPUT_DATATYPE}"
        )
    return schemas


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
