"""Records a sink wrote, read back into plain records, and expected records put in the same form, so that the two
compare field by field (``dagger test``; runs on the driver, after a case ran). Each sink reads its own back
(:meth:`dagger.plugins.sink.Sink.written_records`) with the readers here; a Kafka record part is read back by its
own format (:mod:`dagger.kafka.sink.readback`).

A log sink has no encoding of its own: its rows are read as kept, in the log's forms (timestamps as RFC 3339 UTC
text, bytes as base64, null columns left out, as its lines leave them out). An InfluxDB sink's lines are read back
as points: ``{"measurement", "tags", "fields", "time"}``; a BigQuery sink's rows as its encoder made them for the
Storage Write API (the table's columns, nulls left out; timestamps as RFC 3339 UTC text, bytes as base64).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any


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
