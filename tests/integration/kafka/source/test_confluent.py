"""Protobuf and JSON Schema streams in Confluent's wire format end to end, with the test registry: records
written by confluent-kafka's own ``ProtobufSerializer`` and ``JSONSerializer`` (nothing of ours writes them),
exact counts against what the sink wrote."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from confluent_kafka.schema_registry.json_schema import JSONSerializer

from testing.confluent import (
    ORDER,
    ORDER_JSON_SCHEMA,
    order,
    orders_classes,
    protobuf_serializer,
    registry_client,
    value_context,
)
from testing.produce import consume_all, produce
from tests.conftest import START, dropped, job, json_sink, kafka_stream, output_rows, run_job

pytestmark = pytest.mark.integration


def _stream(broker, source: str, table: str, **extra) -> dict:
    stream = kafka_stream(broker, source, table=table, INPUT_SCHEMA_WIRE_FORMAT="confluent")
    del stream["INPUT_SCHEMA_PROTO_CLASS"], stream["INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"]
    stream.update(extra)
    return stream


def test_protobuf_records_of_a_nested_message_and_of_the_first_one_by_the_0_shortcut(
    spark, broker, schema_registry, topic, tmp_path
):
    Order, Header = orders_classes()
    orders, headers, out = topic("pb-orders"), topic("pb-headers"), topic("pb-out")
    write_order = protobuf_serializer(schema_registry.url, Order)
    write_header = protobuf_serializer(schema_registry.url, Header)
    records = [write_order(order(Order, i, START), value_context(orders)) for i in range(12)]
    assert {r[5:8] for r in records} == {b"\x04\x02\x00"}  # index path [1, 0]
    stray = records[0][:5] + b"\x00" + Header(source="stray").SerializeToString()  # [0]: another message
    produce(
        broker.bootstrap, orders, [(None, r) for r in records[:6]] + [(None, stray)] + [(None, r) for r in records[6:]]
    )
    header = Header(source="pos")
    header.sent_at.FromDatetime(START)
    framed = write_header(header, value_context(headers))
    assert framed[5:6] == b"\x00"  # the [0] shortcut
    produce(broker.bootstrap, headers, [(None, framed)] * 3)
    streams = [
        _stream(
            broker,
            orders,
            "orders",
            INPUT_SCHEMA_PROTO_CLASS=ORDER,
            INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
            SOURCE_KAFKA_INVALID_RECORD_POLICY="drop",
        ),
        # no INPUT_SCHEMA_PROTO_CLASS: the subject's first message, shop.Header
        _stream(broker, headers, "headers", INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX="2"),
    ]
    sql = "SELECT order_number AS name, service_area_id AS area FROM orders UNION ALL SELECT source, -1 FROM headers"
    data = job(None, streams, sql, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **json_sink(broker, out))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(m.value()) for m in output_rows(broker, manager, out, 15)]
    assert sorted((r["name"], r["area"]) for r in rows) == sorted(
        [(f"order-{i}", i % 3) for i in range(12)] + [("pos", -1)] * 3
    )
    assert dropped(query, "orders") == 1  # the stray Header among the orders


def test_json_schema_records_read_by_the_subjects_latest_schema(spark, broker, schema_registry, topic, tmp_path):
    source, out = topic("js-orders"), topic("js-out")
    schema = ORDER_JSON_SCHEMA
    serialize = JSONSerializer(
        json.dumps(schema), registry_client(schema_registry.url), conf={"auto.register.schemas": True}
    )
    records = [
        serialize(
            {
                "order_number": f"o{i}",
                "service_area_id": i % 4,
                "event_timestamp": (START + dt.timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
            },
            value_context(source),
        )
        for i in range(20)
    ]
    produce(broker.bootstrap, source, [(None, r) for r in records])
    stream = _stream(
        broker,
        source,
        "data_stream_0",
        INPUT_DATATYPE="JSON",
        INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
    )
    sql = "SELECT order_number, service_area_id, rowtime FROM data_stream_0 WHERE service_area_id < 3"
    data = job(None, [stream], sql, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **json_sink(broker, out))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(m.value()) for m in output_rows(broker, manager, out, 15)]
    assert sorted(r["order_number"] for r in rows) == sorted(f"o{i}" for i in range(20) if i % 4 < 3)
    assert {r["order_number"]: r["rowtime"] for r in rows}["o5"].startswith("2026-11-22T10:00:05")


def _confluent_sink(broker, out: str, data_type: str, **extra) -> dict:
    return {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "SINK_KAFKA_TOPIC": out,
        "SINK_KAFKA_DATA_TYPE": data_type,
        "SINK_KAFKA_WIRE_FORMAT": "confluent",
        **extra,
    }


def test_the_protobuf_sink_registers_its_messages_file_and_confluents_deserializer_reads_it(
    spark, broker, schema_registry, topic, tmp_path
):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    Order, _ = orders_classes()
    orders, out = topic("pb-in"), topic("pb-sink")
    write = protobuf_serializer(schema_registry.url, Order)
    produce(broker.bootstrap, orders, [(None, write(order(Order, i, START), value_context(orders))) for i in range(10)])
    stream = _stream(
        broker, orders, "orders", INPUT_SCHEMA_PROTO_CLASS=ORDER, INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX="3"
    )
    sink = _confluent_sink(broker, out, "PROTO", SINK_KAFKA_PROTO_MESSAGE=ORDER, SINK_KAFKA_SCHEMA_AUTO_REGISTER="true")
    sql = "SELECT order_number, service_area_id + 10 AS service_area_id, event_timestamp FROM orders"
    data = job(None, [stream], sql, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    read = ProtobufDeserializer(Order, {"use.deprecated.format": False})
    rows = [read(m.value(), value_context(out)) for m in output_rows(broker, manager, out, 10)]
    assert sorted((r.order_number, r.service_area_id) for r in rows) == sorted(
        (f"order-{i}", i % 3 + 10) for i in range(10)
    )
    assert {m[5:8] for m in (r.value() for r in consume_all(broker.bootstrap, out, expected=10))} == {b"\x04\x02\x00"}
    assert schema_registry.requests(f"/subjects/{out}-value/versions") >= 1  # registered under <topic>-value


def test_the_json_sink_registers_a_schema_of_its_columns_and_confluents_deserializer_reads_it(
    spark, broker, schema_registry, topic, tmp_path
):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    Order, _ = orders_classes()
    orders, out = topic("pb-in2"), topic("json-sink")
    write = protobuf_serializer(schema_registry.url, Order)
    produce(broker.bootstrap, orders, [(None, write(order(Order, i, START), value_context(orders))) for i in range(8)])
    stream = _stream(
        broker, orders, "orders", INPUT_SCHEMA_PROTO_CLASS=ORDER, INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX="3"
    )
    sink = _confluent_sink(broker, out, "JSON", SINK_KAFKA_SCHEMA_AUTO_REGISTER="true")
    sql = "SELECT order_number, service_area_id, rowtime FROM orders"
    data = job(None, [stream], sql, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    read = JSONDeserializer(None, schema_registry_client=registry_client(schema_registry.url))
    rows = [read(m.value(), value_context(out)) for m in output_rows(broker, manager, out, 8)]
    assert sorted((r["order_number"], r["service_area_id"]) for r in rows) == sorted(
        (f"order-{i}", i % 3) for i in range(8)
    )
    assert rows[0]["rowtime"].endswith("Z")
