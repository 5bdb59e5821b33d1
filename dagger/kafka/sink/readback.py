"""What the Kafka sink wrote, read back by each record part's own format (``dagger test``; runs on the driver,
after a case ran): protobuf into its JSON mapping (field names as in the ``.proto``, 64-bit integers as strings,
enums by name, timestamps as RFC 3339 text: what ``json_format`` prints), JSON as parsed, Avro by fastavro with the
part's schema (timestamps as ISO text, bytes as base64). Confluent's header is checked and cut first. An expected
record is first written with the same format and read back (:func:`canonical`), so ``"5"`` and ``5`` for an int64,
or an enum's number and its name, expect the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.sinks.readback import WrittenRecordError

if TYPE_CHECKING:
    from dagger.kafka.sink.records import RecordPart


def read_back(part: RecordPart, values: list[bytes]) -> list[dict[str, Any]]:
    """The records ``values`` hold, in ``part``'s format."""
    read = part.format.part_reader(part)
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
    return part.format.part_reader(part)(part.format.part_writer(part)(record))
