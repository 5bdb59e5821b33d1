"""The Python reader's half of Avro decoding (dagger.formats.avro.decode.AvroFrames): headers read, payloads and
ids handed to the JVM with their coordinates, ids looked up in the test registry, and the event-time probe."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.avro import AvroSerializer

from dagger.formats.avro.decode import AvroFrames, UnknownSchemaError
from testing.confluent import registry_client, value_context
from testing.schema_registry import SchemaRegistry

SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_number", "type": "string"},
        {"name": "event_timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
AT = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)


@pytest.fixture
def registry():
    with SchemaRegistry() as server:
        yield server


def _records(registry, n: int, schema: dict = SCHEMA) -> list[bytes]:
    serialize = AvroSerializer(registry_client(registry.url), json.dumps(schema), conf={"auto.register.schemas": True})
    return [
        serialize({"order_number": f"o{i}", "event_timestamp": AT + dt.timedelta(seconds=i)}, value_context("t"))
        for i in range(n)
    ]


def test_payloads_ids_and_coordinates_go_to_the_jvm_and_bad_framing_is_invalid(registry):
    good = _records(registry, 3)
    frames = AvroFrames(
        {1: json.dumps(SCHEMA)}, json.dumps(SCHEMA), {"url": registry.url, "retries": 0}, "event_timestamp"
    )
    values = pa.array(
        [good[0], b"\x03junk", None, good[1], b"\x00\x00\x00\x03\xe7" + good[2][5:], good[2]], pa.binary()
    )
    result = frames.decode(values, ("orders", 4, np.arange(100, 106)))
    batch = result.batch
    assert result.invalid == [1, 2, 4]
    assert result.reasons[0].startswith("magic byte 3") and result.reasons[1] == "record value is null (tombstone)"
    assert result.reasons[2].startswith("unknown schema id 999")
    assert batch.column("__dagger_schema_id").to_pylist() == [1, -1, -1, 1, -1, 1]
    assert batch.column("__dagger_payload").to_pylist()[0] == good[0]  # whole: the JVM's decoder skips the header
    assert batch.column("__dagger_topic").to_pylist() == ["orders"] * 6
    assert batch.column("__dagger_partition").to_pylist() == [4] * 6
    assert batch.column("__dagger_offset").to_pylist() == list(range(100, 106))
    assert batch.column("__internal_validation_field__").to_pylist() == [True, False, False, True, False, True]
    assert frames.rowtimes([good[1], b"\x03junk", None]) == [
        int((AT + dt.timedelta(seconds=1)).timestamp() * 1e6),
        None,
        None,
    ]


def test_an_id_registered_after_the_start_ends_the_batch_saying_to_restart(registry):
    first = _records(registry, 1)
    evolved = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "tip", "type": ["null", "double"], "default": None}]}
    later = _records(registry, 1, evolved)
    frames = AvroFrames({1: json.dumps(SCHEMA)}, json.dumps(SCHEMA), {"url": registry.url, "retries": 0}, None)
    assert frames.decode(pa.array(first, pa.binary())).invalid == []
    with pytest.raises(UnknownSchemaError, match=r"schema id 2 \(subject t-value\), registered after the job started"):
        frames.decode(pa.array(later, pa.binary()))


def test_plain_records_are_bare_datums(registry):
    datums = [r[5:] for r in _records(registry, 2)]
    frames = AvroFrames({0: json.dumps(SCHEMA)}, json.dumps(SCHEMA), None, "event_timestamp")
    result = frames.decode(pa.array([*datums, None], pa.binary()))
    assert result.invalid == [2]
    assert result.batch.column("__dagger_payload").to_pylist()[:2] == datums
    assert result.batch.column("__dagger_schema_id").to_pylist() == [0, 0, 0]
    assert frames.rowtimes(datums)[0] == int(AT.timestamp() * 1e6)
