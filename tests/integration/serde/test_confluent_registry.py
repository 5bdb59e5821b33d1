"""Confluent's wire format read column-wise (dagger.serde.confluent) from records written by confluent-kafka's own
serializers against the test registry (the byte layouts alone: tests/unit/serde/test_confluent_wire.py)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry.json_schema import JSONSerializer

from dagger.formats.json.decode import JsonDecoder
from dagger.serde.confluent_decode import ConfluentDecoder, message_at
from dagger.serde.decode import ProtoDecoder
from testing.confluent import (
    ORDER,
    ORDER_JSON_SCHEMA,
    order,
    orders_classes,
    protobuf_serializer,
    registry_client,
    value_context,
)
from testing.schema_registry import SchemaRegistry
from tests.conftest import START


@pytest.fixture
def registry():
    with SchemaRegistry() as server:
        yield server


def test_protobuf_records_of_a_nested_message_and_the_0_shortcut(registry):
    Order, Header = orders_classes()
    topic = "orders"
    orders = [protobuf_serializer(registry.url, Order)(order(Order, i, START), value_context(topic)) for i in range(6)]
    header = protobuf_serializer(registry.url, Header)(Header(source="pos"), value_context("headers"))
    assert orders[0][5:8] == b"\x04\x02\x00" and header[5:6] == b"\x00"  # [1, 0] and the [0] shortcut
    schema = registry_client(registry.url).get_latest_version(f"{topic}-value", fmt="serialized")
    import base64

    file = base64.b64decode(schema.schema.schema_str)
    assert message_at(file, (1, 0)) == ORDER and message_at(file, (0,)) == "shop.Header"
    assert message_at(file, (1, 1)) is None
    inner = ProtoDecoder(Order.DESCRIPTOR, 3)
    writers = {schema.schema_id: [file]}
    decoder = ConfluentDecoder(inner, True, writers, {"url": registry.url}, ORDER)
    # a Header framed with the orders' schema id: index [0] names shop.Header, not the stream's message
    stray = orders[0][:5] + b"\x00" + Header(source="pos").SerializeToString()
    values = [orders[0], orders[1], stray, orders[2], b"\x05nope", *orders[3:]]
    result = decoder.decode(pa.array(values, pa.binary()))
    assert result.invalid == [2, 4]
    assert (
        result.reasons[0]
        == f"message index [0] of schema id {schema.schema_id} names shop.Header; this stream reads {ORDER}"
    )
    assert result.reasons[1].startswith("magic byte 5")
    batch = result.batch
    assert batch.num_rows == 8
    names = ["order-0", "order-1", "", "order-2", "", "order-3", "order-4", "order-5"]
    assert batch.column("order_number").to_pylist() == names
    assert batch.column("__internal_validation_field__").to_pylist() == [
        True,
        True,
        False,
        True,
        False,
        True,
        True,
        True,
    ]
    rowtimes = batch.column("rowtime").to_pylist()
    assert rowtimes[3].second == 2 and rowtimes[2].year == 1970


def test_an_id_the_job_did_not_know_is_looked_up_once_and_an_unknown_one_is_invalid(registry):
    Order, _ = orders_classes()
    serialize = protobuf_serializer(registry.url, Order)
    records = [serialize(order(Order, i, START), value_context("orders")) for i in range(3)]
    decoder = ConfluentDecoder(ProtoDecoder(Order.DESCRIPTOR, 3), True, {}, {"url": registry.url}, ORDER)
    before = registry.requests("/schemas/ids/")
    unknown = b"\x00\x00\x00\x03\xe7\x00" + order(Order, 9, START).SerializeToString()
    result = decoder.decode(pa.array([*records, unknown], pa.binary()))
    assert result.invalid == [3] and result.reasons[0].startswith("unknown schema id 999")
    assert result.batch.column("order_number").to_pylist()[:3] == ["order-0", "order-1", "order-2"]
    asked = registry.requests("/schemas/ids/") - before
    assert asked == 3  # the new id's schema and its subjects, the unknown id once
    decoder.decode(pa.array([*records, unknown], pa.binary()))
    assert registry.requests("/schemas/ids/") - before == asked  # neither is asked again


def test_json_schema_records_are_read_by_the_reader_schemas_properties(registry):
    schema = ORDER_JSON_SCHEMA
    serialize = JSONSerializer(json.dumps(schema), registry_client(registry.url), conf={"auto.register.schemas": True})
    records = [
        serialize(
            {"order_number": f"o{i}", "service_area_id": i, "event_timestamp": f"2026-11-22T10:00:0{i}Z"},
            value_context("orders"),
        )
        for i in range(4)
    ]
    inner = JsonDecoder(json.dumps(schema), "event_timestamp")
    decoder = ConfluentDecoder(inner, False, {1: []}, {"url": registry.url})
    result = decoder.decode(pa.array([records[0], b"{}", *records[1:]], pa.binary()))
    assert result.invalid == [1] and result.reasons[0].startswith("magic byte 123, not 0")  # unframed JSON
    assert result.batch.column("order_number").to_pylist() == ["o0", None, "o1", "o2", "o3"]
    assert np.array(result.batch.column("service_area_id").to_pylist()[2:]).tolist() == [1, 2, 3]
