"""How a sink writes PROTO records: the output columns matched to the message's fields by name, encoded by Dagger's
encoder in the JVM (``ProtoWriter``) or by ptars in the Python workers (the writing half of
:class:`dagger.formats.proto.Proto`)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2, json_format, message_factory

from dagger.errors import DaggerConfigError, SinkError
from dagger.schema.confluent import register_proto
from dagger.schema.descriptor_sets import DescriptorSet, build_pool
from dagger.serde.confluent_header import framed, message_path
from dagger.sinks.rejected import RowsRefused
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

_ENCODERS = BuiltCache(32)


class ProtoWriting:
    """PROTO records as a sink's record part (the Kafka sink's value or key)."""

    writes = True
    registry_type = "PROTOBUF"
    part_keys = ("message",)
    required_part_keys = ("message",)
    writes_messages = True
    matches_columns_by_name = True

    def resolve_part(self, part: Any, descriptors: DescriptorSet | None, schema_text: str | None) -> None:
        if not part.message:
            also = " (the value's SINK_KAFKA_DATA_TYPE unless set)" if part.part == "key" else ""
            raise DaggerConfigError(
                f"{part.named('data_type')}=PROTO{also} needs {part.named('message')}, the {part.part} message; "
                f"or set {part.named('data_type')} to JSON or AVRO"
            )
        descriptors.find_message(part.message, part.named("message"))
        part.descriptor_set_b64 = base64.b64encode(descriptors.serialized).decode()

    def registered_part(self, part: Any, schemas: Any) -> tuple[int, ...] | None:
        path = message_path(schemas.file_descriptors()[-1], part.message)
        if path is None:
            raise DaggerConfigError(
                f"{part.named('message')}: {part.message} is not a message of subject {part.subject!r}'s schema "
                f"(id {part.schema_id}); register its file there, or set {part.named('auto_register')}=true"
            )
        return path

    def check_part(self, part: Any, taken: pa.Schema, key_columns: tuple[str, ...]) -> list[str]:
        encoder = _encoder(part.descriptor_set_b64, part.message, part.named("message"))
        problems = list(encoder.check(taken))
        if not encoder.mapped_columns(taken.names):
            problems.append(
                f"{part.named('message')}: no output column ({', '.join(taken.names)}) matches a field of "
                f"{part.message}; every record would be empty"
            )
        return problems

    def register_part(self, part: Any, registry: Any, offline: bool) -> tuple[int, tuple[int, ...] | None]:
        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(part.descriptor_set_b64))
        descriptor = build_pool(fds).FindMessageTypeByName(part.message)
        schema_id = 1 if offline else register_proto(registry, part.subject, descriptor)
        return schema_id, message_path(descriptor.file.serialized_pb, part.message)

    def jvm_part(self, part: Any, schema: Any) -> Any:
        """A struct of each row's record and why it cannot be written: Dagger's encoder in the JVM, unless
        ``SPARK_PROTOBUF_CODEC=ptars`` or its classes are missing (then None: ptars in the Python workers)."""
        if not part.jvm_protobuf:
            return None
        from pyspark.sql import SparkSession

        from dagger.serde.proto_jvm import jvm_codec_or_warn, proto_bytes  # start-up: loads numpy

        spark = SparkSession.getActiveSession()
        if spark is None or not jvm_codec_or_warn(spark):
            part.jvm_protobuf = False
            return None
        descriptor_set = base64.b64decode(part.descriptor_set_b64)
        return proto_bytes(
            spark, schema, descriptor_set, part.message, part.header, part.named("message"), part.columns
        )

    def encode_part(self, part: Any, batch: pa.RecordBatch, jvm_column: str) -> pa.BinaryArray:
        if jvm_column in batch.schema.names:
            encoded = batch.column(jvm_column)
            errors = encoded.field("error")
            if errors.null_count < len(errors):
                from dagger.serde.proto_jvm import refused_rows  # start-up: loads numpy

                reason, rows = refused_rows(errors)
                raise RowsRefused("INVALID_MESSAGE_ERROR", reason if part.part == "value" else f"key: {reason}", rows)
            return encoded.field("value")  # Confluent's header in front, where it has one
        try:
            values = _encoder(part.descriptor_set_b64, part.message, part.named("message")).encode(part.taken(batch))
        except SinkError as exc:  # a value the message cannot take: find the rows, reject only them
            raise RowsRefused("INVALID_MESSAGE_ERROR", str(exc)) from None
        return framed(values, part.header)

    def describe_part(self, part: Any) -> str:
        return part.message

    def part_reader(self, part: Any) -> Callable[[bytes], dict[str, Any]]:
        """Protobuf's JSON mapping (field names as in the ``.proto``, 64-bit integers as strings, enums by name,
        timestamps as RFC 3339 text: what ``json_format`` prints)."""
        cls = _message_class(part)
        return lambda body: json_format.MessageToDict(cls.FromString(body), preserving_proto_field_name=True)

    def part_writer(self, part: Any) -> Callable[[dict[str, Any]], bytes]:
        cls = _message_class(part)
        return lambda record: json_format.ParseDict(record, cls()).SerializeToString()

    def spark_sink_refusal(
        self, key: str, jvm_protobuf: bool, protobuf_only: bool, real_time: bool = False
    ) -> str | None:
        if jvm_protobuf:
            return None
        if real_time:
            return (
                f"{key}=PROTO is encoded by ptars in Python workers here (SPARK_PROTOBUF_CODEC=ptars, or Dagger's "
                "JVM classes are not on the class path); set SPARK_PROTOBUF_CODEC=jvm"
            )
        return f"{key}=PROTO is encoded by ptars in Python workers here (SPARK_PROTOBUF_CODEC=ptars)"

    def spark_part(self, part: Any, df: DataFrame, sink_name: str, real_time: bool) -> Any:
        """Dagger's encoder in the JVM; a row it cannot write fails the query, naming the sink and why."""
        from dagger.serde.proto_jvm import proto_bytes  # start-up: loads numpy

        before = f"sink '{sink_name}': a row cannot be written as {part.message} ({part.part}): "
        after = (
            ". A real-time query has no dead-letter output: change the SQL's output, or run in micro-batches, "
            "where rejected rows go to DEAD_LETTER_KAFKA_TOPIC or DEAD_LETTER_PATH"
            if real_time
            else ". Set DEAD_LETTER_KAFKA_TOPIC (+ _BROKERS) or DEAD_LETTER_PATH to keep the job running and "
            "collect rejected rows there (the job then writes with Dagger's Kafka writer)"
        )
        descriptor_set = base64.b64decode(part.descriptor_set_b64)
        header, key = part.header, part.named("message")
        return proto_bytes(
            df.sparkSession, df.schema, descriptor_set, part.message, header, key, part.columns, refusal=(before, after)
        )


def _encoder(descriptor_set_b64: str, message: str, key: str) -> Any:
    """One encoder per (descriptor set, message) per Python worker."""

    def build() -> Any:
        from dagger.serde.encode import ProtoEncoder  # start-up: loads numpy

        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(descriptor_set_b64))
        return ProtoEncoder(build_pool(fds).FindMessageTypeByName(message), key)

    return _ENCODERS.get(content_key(message, key, descriptor_set_b64), build)


def _message_class(part: Any) -> Any:
    descriptors = DescriptorSet([("sink", base64.b64decode(part.descriptor_set_b64))])
    return message_factory.GetMessageClass(descriptors.find_message(part.message or ""))
