"""What a Kafka sink wrote read back into plain records, and expected records put in the same form
(dagger.testing.decoding)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import fastavro
import pytest

from dagger.kafka.sink.readback import canonical, read_back
from dagger.kafka.sink.records import RecordPart
from dagger.sinks.readback import WrittenRecordError

EXAMPLES = Path(__file__).resolve().parents[3] / "descriptors" / "examples.desc"
SUMMARY = "dagger.examples.BookingSummaryMessage"
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "n", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "raw", "type": "bytes"},
    ],
}


def _proto() -> RecordPart:
    part = RecordPart("value", "PROTO", False, message=SUMMARY)
    part.descriptor_set_b64 = base64.b64encode(EXAMPLES.read_bytes()).decode()
    return part


def test_protobuf_reads_back_into_its_json_mapping_and_expected_records_meet_it_there():
    part = _proto()
    written = canonical(part, {"order_number": "o-1", "amount_paid_by_cash": 5})
    assert read_back(part, [_encoded(part, {"order_number": "o-1", "amount_paid_by_cash": 5})]) == [written]
    # an int64 written as a number or as a string, a default left out or given: the same record
    assert (
        canonical(part, {"order_number": "o-1", "amount_paid_by_cash": "5", "service_type": "UNKNOWN_SERVICE"})
        == written
    )


def _encoded(part: RecordPart, record: dict) -> bytes:
    return part.format.part_writer(part)(record)  # the format's own writing, as the sink's


def test_avro_behind_confluents_header_reads_back_with_iso_times_and_base64_bytes():
    part = RecordPart("value", "AVRO", True, avro_schema=json.dumps(ORDER), schema_id=7, header=b"\0\0\0\0\x07")
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), {"n": "o-1", "at": 1_700_000_000_000, "raw": b"\x01"})
    (record,) = read_back(part, [part.header + out.getvalue()])
    assert record == {"n": "o-1", "at": "2023-11-14T22:13:20Z", "raw": "AQ=="}
    with pytest.raises(WrittenRecordError, match="record 0: not behind the header 0000000007"):
        read_back(part, [b"\0\0\0\0\x08" + out.getvalue()])
    with pytest.raises(WrittenRecordError, match="record 1: AVRO that does not read back"):
        read_back(part, [part.header + out.getvalue(), part.header + b"\x02"])


def test_json_reads_back_as_parsed():
    part = RecordPart("value", "JSON", False)
    assert read_back(part, [b'{"a": 1}']) == [{"a": 1}]
    assert canonical(part, {"a": 1}) == {"a": 1}
