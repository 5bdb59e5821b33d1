"""Subjects from a Confluent-compatible registry (dagger.schema.confluent) through confluent-kafka's client,
against the test registry: the job keys that reach it, references followed, and each failure's message."""

from __future__ import annotations

import json

import pytest

from dagger.errors import DaggerConfigError, DescriptorFetchError
from dagger.formats.avro import Avro
from dagger.formats.records import stream_subject
from dagger.job import load_config
from dagger.schema.confluent import ConfluentSettings, SubjectSchemas, fetch_subject, schema_by_id
from dagger.schema.descriptor_sets import DescriptorSet
from testing.schema_registry import SchemaRegistry
from tests.unit.config.test_config import STREAM

ADDRESS = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_number", "type": "string"},
        {"name": "pickup", "type": "shop.Address"},
        {"name": "drop", "type": ["null", "shop.Address"], "default": None},
        {"name": "event_timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def _config(url: str, **keys: str):
    stream = {k: v for k, v in STREAM.items() if not k.startswith("INPUT_SCHEMA_") or k == "INPUT_SCHEMA_TABLE"}
    stream.update(
        SOURCE_KAFKA_TOPIC_NAMES="orders",
        INPUT_DATATYPE="AVRO",
        INPUT_SCHEMA_WIRE_FORMAT="confluent",
        INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
    )
    stream.update({k: v for k, v in keys.items() if k.startswith("INPUT_")})
    job = {k: v for k, v in keys.items() if not k.startswith("INPUT_")}
    return load_config(
        data={
            "FLINK_SQL_QUERY": "SELECT * FROM bookings",
            "STREAMS": [stream],
            "SCHEMA_REGISTRY_CONFLUENT_URL": url,
            **job,
        }
    )


def _register_orders(registry: SchemaRegistry, subject: str = "orders-value") -> int:
    registry.register("shop-address", json.dumps(ADDRESS))
    references = [{"name": "shop.Address", "subject": "shop-address", "version": 1}]
    return registry.register(subject, json.dumps(ORDER), references=references)


def test_a_bearer_token_its_logical_cluster_and_the_timeout_reach_the_client():
    with SchemaRegistry(token="s3cret") as registry:
        _register_orders(registry)
        config = _config(
            registry.url,
            SCHEMA_REGISTRY_CONFLUENT_BEARER_TOKEN="s3cret",
            SCHEMA_REGISTRY_CONFLUENT_BEARER_LOGICAL_CLUSTER="lsrc-1",
            SCHEMA_REGISTRY_CONFLUENT_TIMEOUT_MS="3000",
            SCHEMA_REGISTRY_CONFLUENT_RETRIES="0",
        )
        settings = ConfluentSettings.from_config(config)
        conf = settings.client_conf()
        assert conf["timeout"] == 3 and conf["max.retries"] == 0
        assert conf["bearer.auth.logical.cluster"] == "lsrc-1"
        assert fetch_subject(settings, "orders-value", "here").schema_type == "AVRO"
        wrong = ConfluentSettings.from_config(_config(registry.url, SCHEMA_REGISTRY_CONFLUENT_BEARER_TOKEN="nope"))
        with pytest.raises(
            DaggerConfigError, match="credentials were refused .* check SCHEMA_REGISTRY_CONFLUENT_BEARER_TOKEN"
        ):
            fetch_subject(wrong, "orders-value", "here")


def test_the_subject_is_the_topics_value_subject_unless_named():
    config = _config("http://127.0.0.1:9")
    assert stream_subject(config.STREAMS[0]) == (
        "orders-value",
        "STREAMS[bookings].SOURCE_KAFKA_TOPIC_NAMES (subject <topic>-value)",
    )
    named = _config("http://127.0.0.1:9", INPUT_SCHEMA_SUBJECT="shop.Order")
    assert stream_subject(named.STREAMS[0]) == ("shop.Order", "STREAMS[bookings].INPUT_SCHEMA_SUBJECT")
    pattern = _config("http://127.0.0.1:9")
    pattern.STREAMS[0].settings.SOURCE_KAFKA_TOPIC_NAMES = "orders-.*"
    with pytest.raises(DaggerConfigError, match=r"INPUT_SCHEMA_SUBJECT is required: the stream reads 'orders-\.\*'"):
        stream_subject(pattern.STREAMS[0])


def test_references_are_inlined_every_version_is_kept_and_the_blob_round_trips():
    with SchemaRegistry() as registry:
        first = _register_orders(registry)
        evolved = {**ORDER, "fields": [*ORDER["fields"], {"name": "tip", "type": ["null", "double"], "default": None}]}
        references = [{"name": "shop.Address", "subject": "shop-address", "version": 1}]
        second = registry.register("orders-value", json.dumps(evolved), references=references)
        config = _config(registry.url, SCHEMA_REGISTRY_CONFLUENT_RETRIES="0")
        subject = fetch_subject(ConfluentSettings.from_config(config), "orders-value", "here")
    assert (subject.reader_id, subject.version, sorted(subject.schemas)) == (second, 2, sorted([first, second]))
    reader = json.loads(subject.avro_schema())
    assert reader["fields"][1]["type"]["name"] == "Address"  # written out where first used
    assert reader["fields"][2]["type"] == ["null", "shop.Address"]  # then named
    descriptors = DescriptorSet([subject.to_blob()])
    assert SubjectSchemas.from_blob(subject.to_blob()[1]) == subject
    reader_text, writers = Avro().schemas(config.STREAMS[0], descriptors)
    assert sorted(writers) == sorted([first, second]) and json.loads(reader_text) == reader
    columns = Avro().record_struct(config.STREAMS[0], descriptors)
    assert columns.simpleString() == (
        "struct<order_number:string,pickup:struct<city:string>,drop:struct<city:string>,"
        "event_timestamp:timestamp,tip:double>"
    )


def test_each_failure_says_what_to_check():
    with SchemaRegistry() as registry:
        _register_orders(registry)
        settings = ConfluentSettings(url=registry.url, retries=0)
        with pytest.raises(
            DaggerConfigError,
            match=r"subject .nope-value. is not in the schema registry at .* \(INPUT_SCHEMA_SUBJECT, SINK_KAFKA_SCHEMA_SUBJECT",
        ):
            fetch_subject(settings, "nope-value", "here")
        with pytest.raises(LookupError, match="schema id 999 is not in the schema registry"):
            schema_by_id(settings, 999, "AVRO")
        registry.down()
        with pytest.raises(DescriptorFetchError, match="did not answer: HTTP 503"):
            fetch_subject(settings, "orders-value", "here")
    with pytest.raises(DescriptorFetchError, match="cannot be reached"):
        fetch_subject(ConfluentSettings(url="http://127.0.0.1:1", retries=0), "orders-value", "here")
    with pytest.raises(DaggerConfigError, match="SCHEMA_REGISTRY_CONFLUENT_URL is not set"):
        ConfluentSettings.from_config(load_config(data={"FLINK_SQL_QUERY": "SELECT 1", "STREAMS": [STREAM]}))


def test_passwords_in_urls_are_not_shown():
    settings = ConfluentSettings(url="https://user:pass@sr-1.example:8081, http://sr-2.example")
    assert settings.shown == "https://sr-1.example:8081,http://sr-2.example"


def test_a_protobuf_subject_brings_the_files_it_imports():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from testing.confluent import protobuf_serializer, value_context

    F = descriptor_pb2.FieldDescriptorProto  # noqa: N806
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop", syntax="proto3")
    amount = money.message_type.add(name="Money")
    amount.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pay = descriptor_pb2.FileDescriptorProto(
        name="shop/pay.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    payment = pay.message_type.add(name="Payment")
    payment.field.add(name="amount", number=1, type=F.TYPE_MESSAGE, type_name=".shop.Money", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(pay)
    Payment = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))  # noqa: N806
    with SchemaRegistry() as registry:
        framed = protobuf_serializer(registry.url, Payment)(Payment(amount={"cents": 250}), value_context("pay"))
        subject = fetch_subject(ConfluentSettings(url=registry.url, retries=0), "pay-value", "here")
    assert subject.schema_type == "PROTOBUF" and list(subject.reader["references"]) == ["shop/money.proto"]
    descriptors = DescriptorSet([subject.to_blob()])
    message = descriptors.find_message("shop.Payment")
    assert message.fields_by_name["amount"].message_type.full_name == "shop.Money"
    decoded = message_factory.GetMessageClass(message).FromString(framed[6:])
    assert decoded.amount.cents == 250
