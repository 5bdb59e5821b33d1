"""Records a sink wrote, read back into plain records, and expected records put in the same form, so that the two
compare field by field (``dagger test``; runs on the driver, after a case ran). Each sink reads its own back
(:meth:`dagger.plugins.sink.Sink.written_records`) with the readers here.

A Kafka record part (value or key, a :class:`~dagger.sinks.kafka_records.RecordPart`) is read back by its own
format: protobuf into its JSON mapping (field names as in the ``.proto``, 64-bit integers as strings, enums by
name, timestamps as RFC 3339 text: what ``json_format`` prints), JSON as parsed, Avro by fastavro with the part's
schema (timestamps as ISO text, bytes as base64). Confluent's header is checked and cut first. An expected record
is first written with the same format and read back (:func:`canonical`), so ``"5"`` and ``5`` for an int64, or an
enum's number and its name, expect the same thing.

A log sink has no encoding of its own: its rows are read as kept, in the log's forms (timestamps as RFC 3339 UTC
text, bytes as base64, null columns left out, as its lines leave them out). An InfluxDB sink's lines are read back
as points: ``{"measurement", "tags", "fields", "time"}``; a BigQuery sink's rows as its encoder made them for the
Storage Write API (the table's columns, nulls left out; timestamps as RFC 3339 UTC text, bytes as base64).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
from typing import TYPE_CHECKING, Any

import fastavro  # confluent-kafka's avro extra
from google.protobuf import json_format, message_factory

from dagger.schema.descriptor_sets import DescriptorSet

if TYPE_CHECKING:
    from dagger.sinks.kafka_records import RecordPart


def rfc3339(instant: dt.datetime) -> str:
    """An instant as RFC 3339 UTC text, microseconds without trailing zeros (the log sink's form, and a case's)."""
    return instant.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"


def point(line: str) -> dict[str, Any]:
    """A line of InfluxDB's line protocol as a record: measurement, tags, fields and the time (RFC 3339 UTC, from
    the line's milliseconds; absent when the line has none)."""
    from line_protocol_parser import parse_line  # the influx extra's: only dagger test reads the lines back

    parsed = parse_line(line)
    point = {"measurement": parsed["measurement"], "tags": parsed.get("tags") or {}, "fields": parsed["fields"]}
    if parsed.get("time") is not None:
        point["time"] = rfc3339(dt.datetime.fromtimestamp(parsed["time"] / 1000, dt.UTC))
    return point


def logged(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _log_plain(v) for k, v in row.items() if v is not None}


def _log_plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return rfc3339(value)
    if isinstance(value, dict):
        return {k: _log_plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_log_plain(v) for v in value]
    return plain(value)


class WrittenRecordError(ValueError):
    """A record the sink wrote that its own format does not read back (an encoding problem the case shows)."""


def read_back(part: RecordPart, values: list[bytes]) -> list[dict[str, Any]]:
    """The records ``values`` hold, in ``part``'s format."""
    read = _reader(part)
    out = []
    for i, value in enumerate(values):
        body = value
        if part.header is not None or part.confluent:
            if part.header is not None and not value.startswith(part.header):
                raise WrittenRecordError(f"record {i}: not behind the header {part.header.hex()} the sink writes")
            body = value[len(part.header) if part.header is not None else 5 :]
        try:
            out.append(read(body))
        except Exception as exc:  # noqa: BLE001 - each format raises its own: name the record and what it said
            raise WrittenRecordError(f"record {i}: {part.data_type} that does not read back: {exc}") from None
    return out


def canonical(part: RecordPart, record: dict[str, Any]) -> dict[str, Any]:
    """An expected record as :func:`read_back` would give it (written with the part's format, then read)."""
    return _reader(part)(_writer(part)(record))


def _reader(part: RecordPart) -> Any:
    if part.data_type == "PROTO":
        cls = _message_class(part)
        return lambda body: json_format.MessageToDict(cls.FromString(body), preserving_proto_field_name=True)
    if part.data_type == "JSON":
        return lambda body: json.loads(body)
    schema = fastavro.parse_schema(json.loads(part.avro_schema or "{}"))
    return lambda body: plain(fastavro.schemaless_reader(io.BytesIO(body), schema, None))


def _writer(part: RecordPart) -> Any:
    if part.data_type == "PROTO":
        cls = _message_class(part)
        return lambda record: json_format.ParseDict(record, cls()).SerializeToString()
    if part.data_type == "JSON":
        return lambda record: json.dumps(record).encode()
    schema = fastavro.parse_schema(json.loads(part.avro_schema or "{}"))

    def write(record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, avro_value(schema, record))
        return out.getvalue()

    return write


def _message_class(part: RecordPart) -> Any:
    descriptors = DescriptorSet([("sink", base64.b64decode(part.descriptor_set_b64))])
    return message_factory.GetMessageClass(descriptors.find_message(part.message or ""))


def plain(value: Any) -> Any:
    """fastavro's values as JSON's: datetimes as ISO text, bytes as base64, decimals as text."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return rfc3339(value)  # as the log sink and timestamps in a case
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


#: Avro's time types, written in a case as ISO text (as they read back)
_TIMES = {"timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros", "date"}


def avro_value(schema: Any, value: Any) -> Any:
    """A case's JSON value as fastavro writes it for ``schema`` (parsed): ISO text for Avro's time types becomes
    a datetime or date, base64 text for bytes and fixed becomes bytes; records, arrays, maps and unions are
    followed (a union's first branch that takes the value)."""
    if isinstance(schema, list):  # a union
        for branch in schema:
            converted = avro_value(branch, value)
            if converted is not value or not isinstance(value, str):
                return converted
        return value
    if not isinstance(schema, dict) or value is None:
        return value
    kind, logical = schema.get("type"), schema.get("logicalType")
    if isinstance(value, str) and logical in _TIMES:
        instant = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return instant.date() if logical == "date" else instant
    if isinstance(value, str) and kind in ("bytes", "fixed") and logical is None:
        return base64.b64decode(value)
    if kind == "record" and isinstance(value, dict):
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        return {k: avro_value(fields[k], v) if k in fields else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [avro_value(schema["items"], v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: avro_value(schema["values"], v) for k, v in value.items()}
    return value
