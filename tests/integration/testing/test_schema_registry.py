"""The test Schema Registry (testing.schema_registry) against confluent-kafka's own client, serializers and
deserializers: nothing of ours on the client side."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from testing.samples import message_class
from testing.schema_registry import SchemaRegistry

TOPIC = "orders"
VALUE = SerializationContext(TOPIC, MessageField.VALUE)
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "com.example",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"}],
}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "com.example",
    "fields": [{"name": "city", "type": "string"}],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "address", "type": "com.example.Address"}],
}
PERSON_JSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}
COMMON_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Money { string currency = 1; int64 units = 2; }\n'
ORDER_PROTO = (
    'syntax = "proto3";\npackage shop;\nimport "shop/common.proto";\n'
    'import "google/protobuf/timestamp.proto";\n'
    "message Order { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }\n"
)


@pytest.fixture
def registry():
    with SchemaRegistry() as r:
        yield r


def client(registry: SchemaRegistry, **conf: object) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url, "max.retries": 0, **conf})


def avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def raw(registry: SchemaRegistry, path: str) -> tuple[dict, str]:
    with urllib.request.urlopen(registry.url + path) as answer:
        return json.load(answer), answer.headers["Content-Type"]


def raw_error(registry: SchemaRegistry, path: str) -> int:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(registry.url + path)
    assert set(json.load(caught.value)) == {"error_code", "message"}
    return caught.value.code


def error(call, *args, **kwargs) -> SchemaRegistryError:  # noqa: ANN001
    with pytest.raises(SchemaRegistryError) as caught:
        call(*args, **kwargs)
    return caught.value


def test_avro_register_fetch_versions_and_lookup(registry):
    sr = client(registry)
    assert sr.register_schema("orders-value", avro(ORDER_V1)) == 1
    assert sr.register_schema("orders-value", avro(ORDER_V1)) == 1  # the same schema: the same id, no new version
    assert client(registry).register_schema("orders-value", avro(ORDER_V1)) == 1  # not just the client's cache
    assert sr.register_schema("orders-value", avro(ORDER_V2)) == 2
    assert sr.register_schema("archive-value", avro(ORDER_V1)) == 1  # another subject: the global id is reused
    assert sr.get_subjects() == ["archive-value", "orders-value"]
    assert sr.get_versions("orders-value") == [1, 2]

    fresh = client(registry)
    assert json.loads(fresh.get_schema(1).schema_str) == ORDER_V1
    assert fresh.get_schema(1).schema_type == "AVRO"
    latest = fresh.get_latest_version("orders-value")
    assert (latest.subject, latest.version, latest.schema_id) == ("orders-value", 2, 2)
    assert fresh.get_version("orders-value", 1).schema_id == 1
    assert {(v.subject, v.version) for v in fresh.get_schema_versions(1)} == {("orders-value", 1), ("archive-value", 1)}
    found = fresh.lookup_schema("orders-value", avro(ORDER_V2))
    assert (found.schema_id, found.version) == (2, 2)

    body, content_type = raw(registry, "/schemas/ids/1")
    assert content_type == "application/vnd.schemaregistry.v1+json"
    assert "schemaType" not in body and "references" not in body  # AVRO: no schemaType, as Confluent answers
    body, _ = raw(registry, "/subjects/orders-value/versions/latest")
    assert {k: body[k] for k in ("subject", "version", "id")} == {"subject": "orders-value", "version": 2, "id": 2}


def test_avro_schema_referencing_a_named_type_in_another_subject(registry):
    sr = client(registry)
    sr.register_schema("address", avro(ADDRESS))
    refs = [SchemaReference("com.example.Address", "address", 1)]
    customer = Schema(json.dumps(CUSTOMER), "AVRO", refs)
    schema_id = sr.register_schema("customers-value", customer)
    fetched = client(registry).get_schema(schema_id)
    assert fetched.references == refs

    serializer = AvroSerializer(sr, customer)
    value = {"name": "ana", "address": {"city": "jakarta"}}
    data = serializer(value, SerializationContext("customers", MessageField.VALUE))
    assert data[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    assert AvroDeserializer(client(registry))(data, SerializationContext("customers", MessageField.VALUE)) == value

    bad = Schema(json.dumps(CUSTOMER), "AVRO")  # the named type cannot be resolved without the reference
    assert error(sr.register_schema, "customers-value", bad).error_code == 42201


def test_json_schema_register_and_fetch(registry):
    sr = client(registry)
    schema_id = sr.register_schema("people-value", Schema(json.dumps(PERSON_JSON), "JSON"))
    fetched = client(registry).get_schema(schema_id)
    assert (fetched.schema_type, json.loads(fetched.schema_str)) == ("JSON", PERSON_JSON)
    assert raw(registry, f"/schemas/ids/{schema_id}")[0]["schemaType"] == "JSON"
    invalid = Schema(json.dumps({"type": "no-such-type"}), "JSON")
    assert error(sr.register_schema, "people-value", invalid).error_code == 42201


def test_protobuf_text_with_an_import_is_served_serialized(registry):
    sr = client(registry)
    sr.register_schema("shop/common.proto", Schema(COMMON_PROTO, "PROTOBUF"))
    refs = [SchemaReference("shop/common.proto", "shop/common.proto", 1)]
    schema_id = sr.register_schema("shop-orders-value", Schema(ORDER_PROTO, "PROTOBUF", refs))

    fresh = client(registry)
    assert fresh.get_schema(schema_id).schema_str == ORDER_PROTO  # without format: the text as registered
    serialized = client(registry).get_schema(schema_id, fmt="serialized")  # the client's id cache ignores fmt
    assert (serialized.schema_type, serialized.references) == ("PROTOBUF", refs)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized.schema_str))
    assert list(fdp.dependency) == ["shop/common.proto", "google/protobuf/timestamp.proto"]
    assert [f.type_name for f in fdp.message_type[0].field] == ["", ".shop.Money", ".google.protobuf.Timestamp"]
    common = fresh.get_latest_version("shop/common.proto", fmt="serialized")
    assert descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(common.schema.schema_str)).message_type[
        0
    ].name == ("Money")

    unresolved = Schema(ORDER_PROTO, "PROTOBUF")  # the import without its reference
    assert error(sr.register_schema, "shop-orders-value", unresolved).error_code == 42201
    assert error(sr.register_schema, "x", Schema("message {", "PROTOBUF")).error_code == 42201


def test_errors_are_confluents(registry):
    sr = client(registry)
    sr.register_schema("orders-value", avro(ORDER_V1))
    cases = {
        40403: lambda: sr.get_schema(99),
        40401: lambda: sr.get_latest_version("nope"),
        40402: lambda: sr.get_version("orders-value", 7),
        42201: lambda: sr.register_schema("orders-value", Schema('{"type": "record"}', "AVRO")),
    }
    for code, call in cases.items():
        e = error(call)
        assert (e.error_code, e.http_status_code) == (code, code // 100)
    assert error(sr.lookup_schema, "orders-value", avro(ORDER_V2)).error_code == 40403  # not registered
    assert error(sr.lookup_schema, "nope", avro(ORDER_V1)).error_code == 40401
    assert raw_error(registry, "/associations/resources/-/orders?resourceType=topic") == 404


def test_compatibility_config_and_checks(registry):
    sr = client(registry)
    assert sr.get_compatibility() == "BACKWARD"
    sr.register_schema("orders-value", avro(ORDER_V1))
    required = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string"}]}
    assert sr.test_compatibility("orders-value", avro(ORDER_V2)) is True
    assert sr.test_compatibility("orders-value", avro(required)) is False  # a new field without a default
    e = error(sr.register_schema, "orders-value", avro(required))
    assert (e.http_status_code, e.error_code) == (409, 409)

    assert error(sr.get_compatibility, "orders-value").error_code == 40408  # no subject-level config
    assert sr.set_compatibility("orders-value", "NONE") == {"compatibility": "NONE"}
    assert sr.get_compatibility("orders-value") == "NONE"
    assert sr.register_schema("orders-value", avro(required)) == 2
    sr.set_compatibility(level="FULL")
    assert sr.get_compatibility() == "FULL"
    assert error(sr.set_compatibility, None, "SIDEWAYS").error_code == 42203

    # JSON and PROTOBUF: conservative checks
    sr.register_schema("people-value", Schema(json.dumps(PERSON_JSON), "JSON"))
    sr.set_compatibility("people-value", "BACKWARD")
    renamed = {**PERSON_JSON, "properties": {"name": {"type": "integer"}, "age": {"type": "integer"}}}
    assert sr.test_compatibility("people-value", Schema(json.dumps(renamed), "JSON")) is False
    sr.register_schema("shop/common.proto", Schema(COMMON_PROTO, "PROTOBUF"))
    sr.set_compatibility("shop/common.proto", "BACKWARD")
    added = COMMON_PROTO.replace("}", "string note = 3; }")
    changed = COMMON_PROTO.replace("int64 units", "string units")
    assert sr.test_compatibility("shop/common.proto", Schema(added, "PROTOBUF")) is True
    assert sr.test_compatibility("shop/common.proto", Schema(changed, "PROTOBUF")) is False


def test_basic_and_bearer_auth(registry):
    with SchemaRegistry(user_info="ana:secret", token="t0k") as secured:
        secured.register("orders-value", json.dumps(ORDER_V1))
        assert client(secured, **{"basic.auth.user.info": "ana:secret"}).get_subjects() == ["orders-value"]
        bearer = {
            "bearer.auth.credentials.source": "STATIC_TOKEN",
            "bearer.auth.token": "t0k",
            "bearer.auth.logical.cluster": "lsrc-1",
        }
        assert client(secured, **bearer).get_subjects() == ["orders-value"]
        for conf in ({"basic.auth.user.info": "ana:wrong"}, {}, {**bearer, "bearer.auth.token": "nope"}):
            e = error(client(secured, **conf).get_subjects)
            assert (e.http_status_code, e.error_code) == (401, 401)


def test_down_and_failing_requests(registry):
    sr = client(registry)
    registry.register("orders-value", json.dumps(ORDER_V1))
    registry.down()
    e = error(sr.get_latest_version, "orders-value")
    assert (e.http_status_code, e.error_code) == (503, 50001)
    registry.up()
    assert sr.get_latest_version("orders-value").schema_id == 1

    retrying = client(registry, **{"max.retries": 2, "retries.wait.ms": 1, "retries.max.wait.ms": 5})
    registry.fail_next(2)
    before = registry.requests("/schemas/ids/1")
    assert json.loads(retrying.get_schema(1).schema_str) == ORDER_V1
    assert registry.requests("/schemas/ids/1") - before == 3  # two 503s, then the answer


def test_seeded_schema_keeps_its_id(registry):
    assert registry.register("orders-value", json.dumps(ORDER_V1), id=42) == 42
    assert registry.register("orders-value", json.dumps(ORDER_V2)) == 43
    with pytest.raises(ValueError, match="taken"):
        registry.register("other", json.dumps(ADDRESS), id=42)
    serializer = AvroSerializer(
        client(registry), json.dumps(ORDER_V1), conf={"auto.register.schemas": False, "use.schema.id": 42}
    )
    data = serializer({"id": "o1", "amount": 5}, VALUE)
    assert data[:5] == b"\x00\x00\x00\x00\x2a"
    assert AvroDeserializer(client(registry))(data, VALUE) == {"id": "o1", "amount": 5}


def test_avro_round_trip_and_id_cache(registry):
    serializer = AvroSerializer(client(registry), json.dumps(ORDER_V2))  # auto-registers under orders-value
    values = [{"id": f"o{i}", "amount": i, "note": None if i % 2 else "n"} for i in range(50)]
    encoded = [serializer(v, VALUE) for v in values]
    assert registry.requests("/associations/") >= 1  # confluent-kafka 2.16's default strategy asks, gets a 404
    assert client(registry).get_subjects() == ["orders-value"]
    deserializer = AvroDeserializer(client(registry))
    assert [deserializer(data, VALUE) for data in encoded] == values
    assert registry.requests("/schemas/ids/1") == 1  # one fetch for fifty records


def test_json_round_trip(registry):
    serializer = JSONSerializer(json.dumps(PERSON_JSON), client(registry))
    values = [{"name": "ana", "age": 30}, {"name": "bo"}]
    encoded = [serializer(v, VALUE) for v in values]
    deserializer = JSONDeserializer(None, schema_registry_client=client(registry))
    assert [deserializer(data, VALUE) for data in encoded] == values
    assert registry.requests("/schemas/ids/") == 1


def test_protobuf_round_trip(registry):
    Booking = message_class("dagger.examples.BookingLogMessage")
    bookings = [Booking(order_number=f"o-{i}", customer_id="c1", amount_paid_by_cash=i) for i in range(5)]
    for i, booking in enumerate(bookings):
        booking.event_timestamp.FromSeconds(1_800_000_000 + i)
    serializer = ProtobufSerializer(Booking, client(registry))
    encoded = [serializer(b, VALUE) for b in bookings]
    assert encoded[0][5:7] == b"\x02\x04"  # message index [2]: the third message of booking.proto
    assert client(registry).get_subjects() == ["orders-value"]  # google/protobuf/timestamp.proto: no subject
    deserializer = ProtobufDeserializer(Booking, {}, client(registry))
    assert [deserializer(data, VALUE) for data in encoded] == bookings
    assert registry.requests("/schemas/ids/") == 1


def test_protobuf_round_trip_with_an_imported_file(registry):
    pool = descriptor_pool.DescriptorPool()
    common = descriptor_pb2.FileDescriptorProto(name="shop/common.proto", package="shop", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    common.message_type.add(name="Money").field.add(name="units", number=1, type=field.TYPE_INT64)
    order = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3", dependency=["shop/common.proto"]
    )
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=field.TYPE_STRING)
    message.field.add(name="total", number=2, type=field.TYPE_MESSAGE, type_name=".shop.Money")
    pool.Add(common)
    pool.Add(order)
    Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))

    serializer = ProtobufSerializer(Order, client(registry))
    values = [Order(id=f"o{i}", total={"units": i}) for i in range(5)]
    encoded = [serializer(v, VALUE) for v in values]
    assert client(registry).get_subjects() == ["orders-value", "shop/common.proto"]  # the import: its own subject
    value = client(registry).get_latest_version("orders-value")
    assert value.schema.references == [SchemaReference("shop/common.proto", "shop/common.proto", 1)]
    deserializer = ProtobufDeserializer(Order, {}, client(registry))
    assert [deserializer(data, VALUE) for data in encoded] == values
    assert registry.requests("/schemas/ids/") == 1


def test_module_serves_until_interrupted():
    process = subprocess.Popen(
        [sys.executable, "-m", "testing.schema_registry", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "/subjects") as answer:
            assert json.load(answer) == []
    finally:
        process.terminate()
        process.wait(10)
