"""What a Kafka sink wrote, read back into plain records, and a case's expected records put in the same form, so
that the two compare field by field (runs on the driver, after the case ran).

A record part (value or key, a :class:`~dagger.sinks.kafka_records.RecordPart`) is read back by its own format:
protobuf into its JSON mapping (field names as in the ``.proto``, 64-bit integers as strings, enums by name,
timestamps as RFC 3339 text: what ``json_format`` prints), JSON as parsed, Avro by fastavro with the part's
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

if TYPE_CHECKING:
    from dagger.plugins.sink import Sink
    from dagger.sinks.kafka_records import RecordPart


class UncapturedSinkError(ValueError):
    """A sink whose records ``dagger test`` cannot keep (its type has no capture yet)."""


def written(sink: Sink) -> list[dict[str, Any]]:
    """The records ``sink`` wrote in a case (its capture directory), read back."""
    from dagger.sinks.capture import read_spool, read_spool_rows

    if sink.capture is None:
        raise UncapturedSinkError(f"sink {sink.display_name} was not captured")
    if sink.name == "kafka":
        return read_back(sink.value, [value for value, _ in read_spool(sink.capture)])  # type: ignore[attr-defined]
    if sink.name == "log":
        return [_logged(row) for row in read_spool_rows(sink.capture)]
    if sink.name == "influx":
        return [_point(row["line"]) for row in read_spool_rows(sink.capture)]
    if sink.name == "bigquery":
        return [_plain({k: v for k, v in row.items() if v is not None}) for row in read_spool_rows(sink.capture)]
    raise UncapturedSinkError(
        f"sink {sink.display_name}: dagger test keeps the records of the kafka, log, influx and bigquery sinks; "
        f"a {sink.name} sink cannot be tested"
    )


def expected_form(sink: Sink, record: dict[str, Any], partial: bool) -> dict[str, Any]:
    """An expected record in the form :func:`written` gives (a partial record is compared as written)."""
    if sink.name == "kafka" and not partial:
        return canonical(sink.value, record)  # type: ignore[attr-defined]
    if sink.name in ("log", "bigquery"):
        return {k: v for k, v in record.items() if v is not None}
    return record


def _point(line: str) -> dict[str, Any]:
    """A line of InfluxDB's line protocol as a record: measurement, tags, fields and the time (RFC 3339 UTC, from
    the line's milliseconds; absent when the line has none)."""
    from line_protocol_parser import parse_line

    from dagger.sinks.log import format_value

    parsed = parse_line(line)
    point = {"measurement": parsed["measurement"], "tags": parsed.get("tags") or {}, "fields": parsed["fields"]}
    if parsed.get("time") is not None:
        point["time"] = format_value(dt.datetime.fromtimestamp(parsed["time"] / 1000, dt.UTC))
    return point


def _logged(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _log_plain(v) for k, v in row.items() if v is not None}


def _log_plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        from dagger.sinks.log import format_value

        return format_value(value)
    if isinstance(value, dict):
        return {k: _log_plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_log_plain(v) for v in value]
    return _plain(value)


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
        from google.protobuf import json_format

        cls = _message_class(part)
        return lambda body: json_format.MessageToDict(cls.FromString(body), preserving_proto_field_name=True)
    if part.data_type == "JSON":
        return lambda body: json.loads(body)
    import fastavro

    schema = fastavro.parse_schema(json.loads(part.avro_schema or "{}"))
    return lambda body: _plain(fastavro.schemaless_reader(io.BytesIO(body), schema, None))


def _writer(part: RecordPart) -> Any:
    if part.data_type == "PROTO":
        from google.protobuf import json_format

        cls = _message_class(part)
        return lambda record: json_format.ParseDict(record, cls()).SerializeToString()
    if part.data_type == "JSON":
        return lambda record: json.dumps(record).encode()
    import fastavro

    from dagger.testing.records import avro_value

    schema = fastavro.parse_schema(json.loads(part.avro_schema or "{}"))

    def write(record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, avro_value(schema, record))
        return out.getvalue()

    return write


def _message_class(part: RecordPart) -> Any:
    from google.protobuf import message_factory

    from dagger.schema.descriptor_sets import DescriptorSet

    descriptors = DescriptorSet([("sink", base64.b64decode(part.descriptor_set_b64))])
    return message_factory.GetMessageClass(descriptors.find_message(part.message or ""))


def _plain(value: Any) -> Any:
    """fastavro's values as JSON's: datetimes as ISO text, bytes as base64, decimals as text."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        from dagger.sinks.log import format_value

        return format_value(value)  # RFC 3339 UTC, as the log sink and timestamps in a case
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value
