"""The Kafka sink's records in Confluent's wire format (``SINK_KAFKA_WIRE_FORMAT=confluent``), for its three data
types: which schema the records carry — the subject's latest, looked up when the job starts and pinned with the
descriptor sets, or one registered at start (``SINK_KAFKA_SCHEMA_AUTO_REGISTER``) — and the header in front of
each record: magic byte 0, the schema id, and for protobuf the message-index path of ``SINK_KAFKA_PROTO_MESSAGE``
in the registered file. Runs on the driver; the writers only prefix the header, column-wise.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dagger.errors import DaggerConfigError
from dagger.schema.confluent import client, register

if TYPE_CHECKING:
    from dagger.schema.descriptor_sets import DescriptorSet

#: the registry's name of each data type's schemas
SCHEMA_TYPES = {"AVRO": "AVRO", "PROTO": "PROTOBUF", "JSON": "JSON"}


def looked_up(descriptors: DescriptorSet | None, subject: str, data_type: str, key: str) -> Any:
    """The subject's schemas the job read at start (:class:`~dagger.schema.confluent.SubjectSchemas`)."""
    schemas = (descriptors.subjects if descriptors is not None else {}).get(subject)
    wanted = SCHEMA_TYPES[data_type]
    if schemas is None or schemas.schema_type != wanted:
        held = f"holds {schemas.schema_type} schemas" if schemas is not None else "was not read"
        raise DaggerConfigError(f"{key}: subject {subject!r} {held}; data type {data_type} needs a {wanted} one")
    return schemas


def register_proto(settings: Any, subject: str, descriptor: Any) -> int:
    """Register the file of ``descriptor`` (a message) under ``subject``, each imported file first under its own
    name as confluent-kafka's serializer does (the well-known types are every client's own); the file's id."""
    from confluent_kafka.schema_registry import SchemaReference

    def references(file: Any) -> list[Any]:
        out = []
        for dependency in file.dependencies:
            if dependency.name.startswith("google/protobuf/"):
                continue
            register(settings, dependency.name, _b64(dependency), "PROTOBUF", references(dependency))
            version = client(settings).get_latest_version(dependency.name).version
            out.append(SchemaReference(dependency.name, dependency.name, version))
        return out

    return register(settings, subject, _b64(descriptor.file), "PROTOBUF", references(descriptor.file))


def _b64(file: Any) -> str:
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return base64.b64encode(proto.SerializeToString()).decode()


def json_schema_of(schema: pa.Schema, title: str) -> str:
    """A JSON Schema of rows of ``schema`` as the sink writes them (``json_lines``), for auto-register."""
    properties = {f.name: _json_type(f) for f in schema}
    return json.dumps({"title": title, "type": "object", "properties": properties})


def _json_type(field: pa.Field) -> dict:
    kind = field.type
    if pa.types.is_boolean(kind):
        out: dict = {"type": "boolean"}
    elif pa.types.is_integer(kind):
        out = {"type": "integer"}
    elif pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        out = {"type": "number"}
    elif pa.types.is_timestamp(kind):
        out = {"type": "string", "format": "date-time"}
    elif pa.types.is_date(kind):
        out = {"type": "string", "format": "date"}
    elif pa.types.is_struct(kind):
        out = {
            "type": "object",
            "properties": {kind.field(i).name: _json_type(kind.field(i)) for i in range(kind.num_fields)},
        }
    elif pa.types.is_map(kind):
        out = {"type": "array", "items": {"type": "array"}}  # [key, value] pairs, as json_lines writes maps
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        out = {"type": "array", "items": _json_type(kind.value_field)}
    else:
        out = {"type": "string"}
    if field.nullable:
        out["type"] = [out["type"], "null"]
    return out
