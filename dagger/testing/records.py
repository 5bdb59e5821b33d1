"""A test case's input records made into the bytes a broker would hold, with the stream's own schema, so that
they reach the job through the same decoding as records from Kafka (runs on the driver, before the case runs).

* protobuf streams: a record is written in protobuf's JSON mapping (``json_format``: int64 as strings or numbers,
  timestamps as RFC 3339 strings, enums by name) and serialized as the stream's message;
* JSON streams: the record's JSON text;
* Avro streams: the record as fastavro writes it with the stream's schema (the subject's latest version in
  Confluent's wire format);
* in Confluent's wire format, behind the header the registry's id (and for protobuf the message's index path)
  makes;
* ``{"_RAW_BASE64": "..."}``: the bytes as they are (an undecodable record, for the invalid-record policy).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from typing import TYPE_CHECKING, Any

from dagger.config.cases import RAW
from dagger.kafka.sink.registry import header, message_path
from dagger.serde.formats import avro_schemas, proto_message, registered, stream_subject
from dagger.sinks.readback import avro_value

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet


class CaseInputError(ValueError):
    """A case's record that the stream's schema cannot hold (an invalid test file: ``dagger test`` exits 2)."""


def encode_records(
    stream: StreamConfig, descriptors: DescriptorSet, records: list[dict[str, Any]], where: str
) -> list[bytes]:
    """``records`` of the stream as wire bytes; ``where`` names them in errors (``case 'x': INPUT.bookings``)."""
    encode = _encoder(stream, descriptors)
    out = []
    for i, record in enumerate(records):
        if RAW in record:
            try:
                out.append(base64.b64decode(record[RAW], validate=True))
            except (binascii.Error, TypeError) as exc:
                raise CaseInputError(f"{where}[{i}]: {RAW} is not base64 ({exc})") from None
            continue
        try:
            out.append(encode(record))
        except CaseInputError as exc:
            raise CaseInputError(f"{where}[{i}]: {exc}") from None
    return out


def _encoder(stream: StreamConfig, descriptors: DescriptorSet) -> Any:
    confluent = stream_subject(stream) is not None
    if stream.INPUT_DATATYPE == "AVRO":
        return _avro(stream, descriptors, confluent)
    if stream.INPUT_DATATYPE == "JSON":
        prefix = _header(stream, descriptors, "JSON") if confluent else b""
        return lambda record: prefix + json.dumps(record).encode()
    return _proto(stream, descriptors, confluent)


def _proto(stream: StreamConfig, descriptors: DescriptorSet, confluent: bool) -> Any:
    from google.protobuf import json_format, message_factory

    name = proto_message(stream, descriptors) or ""
    cls = message_factory.GetMessageClass(descriptors.find_message(name))
    prefix = _header(stream, descriptors, "PROTOBUF", name) if confluent else b""

    def encode(record: dict[str, Any]) -> bytes:
        try:
            return prefix + json_format.ParseDict(record, cls()).SerializeToString()
        except json_format.ParseError as exc:
            raise CaseInputError(f"not a {name} in protobuf's JSON mapping: {exc}") from None

    return encode


def _avro(stream: StreamConfig, descriptors: DescriptorSet, confluent: bool) -> Any:
    import fastavro

    reader, _ = avro_schemas(stream, descriptors)
    schema = fastavro.parse_schema(json.loads(reader))
    prefix = _header(stream, descriptors, "AVRO") if confluent else b""

    def encode(record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, schema, avro_value(schema, record))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CaseInputError(f"not a record of the stream's Avro schema: {exc}") from None
        return prefix + out.getvalue()

    return encode


def _header(stream: StreamConfig, descriptors: DescriptorSet, schema_type: str, message: str | None = None) -> bytes:
    """Confluent's header of the subject's latest version (for protobuf, with ``message``'s index path)."""

    schemas = registered(stream, descriptors, schema_type)
    if message is None:
        return header(schemas.reader_id)
    path = message_path(schemas.file_descriptors()[-1], message)
    if path is None:
        raise CaseInputError(f"message {message} is not in the subject's latest schema")
    return header(schemas.reader_id, path)
