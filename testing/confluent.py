"""Records in Confluent's wire format for the tests, written by confluent-kafka's own serializers (nothing of
ours encodes them): a protobuf file whose message of interest is nested (index path ``[1, 0]``) beside a top-level
one (``[0]``), and the serializers for it, for Avro and for JSON Schema.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

#: ``shop/orders.proto``: ``shop.Header`` is message ``[0]``; ``shop.Envelope.Order`` is ``[1, 0]``
#: a JSON Schema of an order's three fields, as a registry's JSON subject holds it
ORDER_JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string"},
        "service_area_id": {"type": "integer"},
        "event_timestamp": {"type": "string", "format": "date-time"},
    },
}

ORDER = "shop.Envelope.Order"
HEADER = "shop.Header"


def _orders_file() -> descriptor_pb2.FileDescriptorProto:
    F = descriptor_pb2.FieldDescriptorProto  # noqa: N806
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/orders.proto", package="shop", syntax="proto3", dependency=["google/protobuf/timestamp.proto"]
    )
    header = file.message_type.add(name="Header")
    header.field.add(name="source", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    header.field.add(
        name="sent_at",
        number=2,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=F.LABEL_OPTIONAL,
    )
    envelope = file.message_type.add(name="Envelope")
    order = envelope.nested_type.add(name="Order")
    order.field.add(name="order_number", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="service_area_id", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(
        name="event_timestamp",
        number=3,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=F.LABEL_OPTIONAL,
    )
    return file


def orders_classes() -> tuple[type, type]:
    """``(Order, Header)`` message classes of ``shop/orders.proto``, in a pool of their own."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(_orders_file())
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(ORDER)),
        message_factory.GetMessageClass(pool.FindMessageTypeByName(HEADER)),
    )


def order(message_class: type, i: int, start: dt.datetime) -> Any:
    """Order ``i``: ``order-{i}``, area ``i % 3``, event time ``start + i`` seconds."""
    record = message_class(order_number=f"order-{i}", service_area_id=i % 3)
    record.event_timestamp.FromDatetime(start + dt.timedelta(seconds=i))
    return record


def registry_client(url: str, **conf: Any) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": url, **conf})


def protobuf_serializer(url: str, message_class: type) -> Any:
    """confluent-kafka's ``ProtobufSerializer`` registering ``message_class``' file under ``<topic>-value``."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    return ProtobufSerializer(
        message_class, registry_client(url), conf={"auto.register.schemas": True, "use.deprecated.format": False}
    )


def value_context(topic: str) -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)
