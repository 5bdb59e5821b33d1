"""A case's input records made into wire bytes with the stream's own schema (dagger.testing.records), read back by
the stream's own decoder: protobuf's JSON mapping, JSON, Avro (plain and in Confluent's wire format), raw bytes."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from types import SimpleNamespace

import fastavro
import pytest

from dagger.formats.proto import Proto
from dagger.job import load_config
from dagger.kafka.source.spec import KafkaSourceSpec, decoder_for
from dagger.schema.confluent import ConfluentSettings, fetch_subject
from dagger.schema.descriptor_sets import DescriptorSet
from dagger.testing.records import CaseInputError, encode_records
from testing.schema_registry import SchemaRegistry
from tests.conftest import job, kafka_stream

EXAMPLES = Path(__file__).resolve().parents[3] / "descriptors" / "examples.desc"
BOOKING = "dagger.examples.BookingLogMessage"
BROKER = SimpleNamespace(bootstrap="localhost:1")
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "order_number", "type": "string"}, {"name": "amount", "type": ["null", "long"]}],
}


def _stream(**keys):
    config = load_config(data=job(None, [kafka_stream(BROKER, "bookings", "bookings", **keys)], "SELECT 1"))
    return config.STREAMS[0]


def _examples() -> DescriptorSet:
    return DescriptorSet([("examples.desc", EXAMPLES.read_bytes())])


def test_protobuf_records_in_the_json_mapping_are_read_back_by_the_streams_decoder():
    records = [
        {"order_number": "o-1", "amountPaidByCash": 42, "eventTimestamp": "2026-11-27T10:00:00Z"},
        {"_RAW_BASE64": base64.b64encode(b"\x0a\x05ab").decode()},
    ]
    values = encode_records(_stream(), _examples(), records, "case 'c': INPUT.bookings")
    spec = KafkaSourceSpec(
        table="bookings",
        topic_pattern="bookings",
        client_config={},
        records=Proto.options_for(EXAMPLES.read_bytes(), BOOKING, 5),
        fields=["order_number", "event_timestamp", "amount_paid_by_cash"],
    )
    result = decoder_for(spec).decode(values)
    assert result.invalid == [1]  # the raw record goes in as it is, and is undecodable
    row = result.batch.to_pylist()[0]
    assert (row["order_number"], row["amount_paid_by_cash"]) == ("o-1", 42)
    assert row["rowtime"].isoformat() == "2026-11-27T10:00:00+00:00"


def test_a_record_the_message_cannot_hold_names_the_case_table_index_and_field():
    with pytest.raises(CaseInputError, match=r"case 'c': INPUT.bookings\[1\]: not a dagger.examples.BookingLogMessage"):
        encode_records(_stream(), _examples(), [{}, {"no_such_field": 1}], "case 'c': INPUT.bookings")
    with pytest.raises(CaseInputError, match=r"\[0\]: _RAW_BASE64 is not base64"):
        encode_records(_stream(), _examples(), [{"_RAW_BASE64": "*"}], "here")


def test_json_records_are_their_json_text():
    schema = json.dumps({"type": "object", "properties": {"order_number": {"type": "string"}}})
    stream = _stream(INPUT_DATATYPE="JSON", INPUT_SCHEMA_JSON_SCHEMA=schema, INPUT_SCHEMA_PROTO_CLASS=None)
    assert encode_records(stream, _examples(), [{"order_number": "o-1"}], "here") == [b'{"order_number": "o-1"}']


def test_avro_records_are_written_with_the_subjects_latest_schema_behind_confluents_header():
    with SchemaRegistry() as registry:
        schema_id = registry.register("bookings-value", json.dumps(ORDER))
        stream = _stream(
            INPUT_DATATYPE="AVRO",
            INPUT_SCHEMA_WIRE_FORMAT="confluent",
            INPUT_SCHEMA_PROTO_CLASS=None,
            INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX=None,
        )
        settings = ConfluentSettings(url=registry.url, retries=0)
        descriptors = DescriptorSet([fetch_subject(settings, "bookings-value", "here").to_blob()])
    (value,) = encode_records(stream, descriptors, [{"order_number": "o-1", "amount": 5}], "here")
    assert value[:5] == b"\0" + schema_id.to_bytes(4, "big")
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(ORDER), None)
    assert record == {"order_number": "o-1", "amount": 5}
    with pytest.raises(CaseInputError, match=r"here\[0\]: not a record of the stream's Avro schema"):
        encode_records(stream, descriptors, [{"amount": "five"}], "here")
