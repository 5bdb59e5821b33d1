"""The Kafka sink's record keys (``SINK_KAFKA_KEY_*``, :mod:`dagger.kafka.sink.records`) end to end: Avro,
protobuf and JSON keys beside values of any data type, in Confluent's wire format with the test registry or bare,
read back by confluent-kafka's own deserializers, with exact counts against what the sink wrote."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from testing.confluent import HEADER, ORDER, order, orders_classes, protobuf_serializer, registry_client, value_context
from testing.produce import produce
from tests.conftest import START, job, kafka_stream, output_rows, run_job

pytestmark = pytest.mark.integration


def _orders(broker, schema_registry, source: str, n: int) -> dict:
    """``n`` protobuf orders in Confluent's format on ``source``, and the stream that reads them."""
    Order, _ = orders_classes()
    write = protobuf_serializer(schema_registry.url, Order)
    produce(broker.bootstrap, source, [(None, write(order(Order, i, START), value_context(source))) for i in range(n)])
    stream = kafka_stream(broker, source, table="orders", INPUT_SCHEMA_WIRE_FORMAT="confluent")
    stream.update(INPUT_SCHEMA_PROTO_CLASS=ORDER, INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX="3")
    return stream


def _sink(broker, out: str, data_type: str, **extra) -> dict:
    return {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "SINK_KAFKA_TOPIC": out,
        "SINK_KAFKA_DATA_TYPE": data_type,
        **extra,
    }


def _key_context(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY)


SQL = "SELECT order_number, service_area_id, rowtime FROM orders"


def test_avro_keys_of_the_chosen_columns_are_registered_under_topic_key_and_confluents_deserializer_reads_them(
    spark, broker, schema_registry, topic, tmp_path
):
    source, out = topic("keys-in"), topic("keys-avro")
    stream = _orders(broker, schema_registry, source, 12)
    sink = _sink(
        broker,
        out,
        "AVRO",
        SINK_KAFKA_WIRE_FORMAT="confluent",
        SINK_KAFKA_SCHEMA_AUTO_REGISTER="true",
        SINK_KAFKA_KEY_COLUMNS="order_number, service_area_id",
        SINK_KAFKA_KEY_AVRO_RECORD_NAME="shop.OrderKey",
    )
    data = job(None, [stream], SQL, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    read = AvroDeserializer(registry_client(schema_registry.url))
    records = output_rows(broker, manager, out, 12)
    keys = [read(m.key(), _key_context(out)) for m in records]
    values = [read(m.value(), value_context(out)) for m in records]
    assert sorted((k["order_number"], k["service_area_id"]) for k in keys) == sorted(
        (f"order-{i}", i % 3) for i in range(12)
    )
    # each key is its own record's: the value (every column) holds the same order
    assert all(k["order_number"] == v["order_number"] for k, v in zip(keys, values, strict=True))
    assert set(values[0]) == {"order_number", "service_area_id", "rowtime"}
    registered = registry_client(schema_registry.url).get_latest_version(f"{out}-key")
    assert json.loads(registered.schema.schema_str)["name"] == "OrderKey"


def test_a_looked_up_avro_key_schema_names_the_key_columns_beside_bare_json_values(
    spark, broker, schema_registry, topic, tmp_path
):
    source, out = topic("keys-in2"), topic("keys-lookup")
    stream = _orders(broker, schema_registry, source, 9)
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "order_number", "type": "string"}]}
    key_id = schema_registry.register("order-keys", json.dumps(key_schema))
    sink = _sink(
        broker,
        out,
        "JSON",
        SINK_KAFKA_KEY_DATA_TYPE="AVRO",
        SINK_KAFKA_KEY_WIRE_FORMAT="confluent",
        SINK_KAFKA_KEY_SCHEMA_SUBJECT="order-keys",
        SINK_KAFKA_KEY_SCHEMA_AUTO_REGISTER="false",
    )
    # order-3 loses its number: its key cannot be made (the key's field is not nullable), so that row alone goes to
    # the dead letters
    sql = (
        "SELECT CASE WHEN order_number = 'order-3' THEN NULL ELSE order_number END AS order_number, service_area_id, "
        "rowtime FROM orders"
    )
    data = job(
        None,
        [stream],
        sql,
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        DEAD_LETTER_PATH=str(tmp_path / "dl"),
        **sink,
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    read = AvroDeserializer(registry_client(schema_registry.url))
    records = output_rows(broker, manager, out, 8)
    assert {m.key()[:5] for m in records} == {b"\0" + key_id.to_bytes(4, "big")}
    keys = [read(m.key(), _key_context(out)) for m in records]
    values = [json.loads(m.value()) for m in records]  # bare JSON: no header, and no column but the output's
    assert sorted(k["order_number"] for k in keys) == sorted(f"order-{i}" for i in range(9) if i != 3)
    assert all(set(v) == {"order_number", "service_area_id", "rowtime"} for v in values)
    assert [k["order_number"] for k in keys] == [v["order_number"] for v in values]
    letters = [json.loads(x) for f in (tmp_path / "dl").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert len(letters) == 1 and letters[0]["row"]["service_area_id"] == 0
    assert letters[0]["reason"] == "key: null in order_number, whose field in the Avro schema is not a union with null"


def test_a_protobuf_key_message_is_registered_and_confluents_deserializer_reads_keys_and_values(
    spark, broker, schema_registry, topic, tmp_path
):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    Order, Header = orders_classes()
    source, out = topic("keys-in3"), topic("keys-proto")
    stream = _orders(broker, schema_registry, source, 7)
    sink = _sink(
        broker,
        out,
        "PROTO",
        SINK_KAFKA_WIRE_FORMAT="confluent",
        SINK_KAFKA_PROTO_MESSAGE=ORDER,
        SINK_KAFKA_PROTO_KEY=HEADER,
        SINK_KAFKA_KEY_COLUMNS="source",
        SINK_KAFKA_KEY_SCHEMA_AUTO_REGISTER="true",
        SINK_KAFKA_SCHEMA_AUTO_REGISTER="true",
    )
    sql = "SELECT order_number, service_area_id, event_timestamp, CONCAT('shop-', order_number) AS source FROM orders"
    data = job(None, [stream], sql, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    records = output_rows(broker, manager, out, 7)
    keys = [ProtobufDeserializer(Header, {"use.deprecated.format": False})(m.key(), _key_context(out)) for m in records]
    values = [
        ProtobufDeserializer(Order, {"use.deprecated.format": False})(m.value(), value_context(out)) for m in records
    ]
    assert sorted(k.source for k in keys) == sorted(f"shop-order-{i}" for i in range(7))
    assert [k.source for k in keys] == [f"shop-{v.order_number}" for v in values]
    assert {m.key()[5] for m in records} == {0}  # shop.Header is the file's first message: the [0] shortcut
    assert registry_client(schema_registry.url).get_latest_version(f"{out}-key").schema.schema_type == "PROTOBUF"


def test_bare_json_keys_are_shaped_by_their_json_schema(spark, broker, schema_registry, topic, tmp_path):
    source, out = topic("keys-in4"), topic("keys-json")
    stream = _orders(broker, schema_registry, source, 6)
    key_schema = {"type": "object", "properties": {"area": {"type": "string"}, "order_number": {"type": "string"}}}
    sink = _sink(
        broker, out, "JSON", SINK_KAFKA_KEY_DATA_TYPE="JSON", SINK_KAFKA_KEY_JSON_SCHEMA=json.dumps(key_schema)
    )
    sql = "SELECT order_number, service_area_id AS area, rowtime FROM orders"
    data = job(None, [stream], sql, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    keys = [json.loads(m.key()) for m in output_rows(broker, manager, out, 6)]
    # the schema's properties in its order, the area converted to the string it says
    assert sorted(keys, key=lambda k: k["order_number"]) == [
        {"area": str(i % 3), "order_number": f"order-{i}"} for i in range(6)
    ]
    assert all(list(k) == ["area", "order_number"] for k in keys)


def test_keys_that_cannot_be_made_are_refused_before_start_naming_the_key_to_set(spark, broker, stencil, tmp_path):
    from dagger.job import Job, load_config

    stream = kafka_stream(broker, "orders-never-read", table="orders")

    def problems(sql: str, **sink: str) -> str:
        data = job(stencil, [stream], sql, **_sink(broker, "never-written", "JSON", **sink))
        return "\n".join(
            Job(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), spark=spark).validate().problems
        )

    sql = "SELECT order_number, service_area_id FROM orders"
    assert problems(sql, SINK_KAFKA_KEY_DATA_TYPE="AVRO") == (
        "SINK_KAFKA_KEY_COLUMNS: name the output columns the key is made of (order_number, service_area_id)"
    )
    assert "SINK_KAFKA_KEY_COLUMNS: customer_id not among the output columns (order_number, service_area_id)" in (
        problems(sql, SINK_KAFKA_KEY_COLUMNS="customer_id")
    )
    from dagger.errors import DaggerConfigError

    with pytest.raises(DaggerConfigError) as refused:  # a protobuf value's key is protobuf unless said otherwise
        problems(
            sql,
            SINK_KAFKA_DATA_TYPE="PROTO",
            SINK_KAFKA_PROTO_MESSAGE="dagger.examples.BookingLogMessage",
            SINK_KAFKA_KEY_COLUMNS="order_number",
        )
    assert str(refused.value) == (
        "SINK_KAFKA_KEY_DATA_TYPE=PROTO (the value's SINK_KAFKA_DATA_TYPE unless set) needs SINK_KAFKA_PROTO_KEY, the "
        "key message; or set SINK_KAFKA_KEY_DATA_TYPE to JSON or AVRO"
    )
    given = {"type": "record", "name": "K", "fields": [{"name": "order_number", "type": "long"}]}
    assert "SINK_KAFKA_KEY_AVRO_SCHEMA: column 'order_number' is string, the schema's field is bigint" in problems(
        sql, SINK_KAFKA_KEY_DATA_TYPE="AVRO", SINK_KAFKA_KEY_AVRO_SCHEMA=json.dumps(given)
    )
