"""How PROTO streams are read: the table's columns, the checks, the Kafka reader's decoder, the decoding in the JVM
and ``dagger test``'s records (the reading half of :class:`dagger.formats.proto.Proto`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2, json_format, message_factory

from dagger.errors import DaggerConfigError
from dagger.formats.records import key_of, registered, stream_subject
from dagger.plugins.format import Format, FormatEnv
from dagger.schema.descriptor_sets import build_pool
from dagger.schema.projection import prune_message, source_fields
from dagger.serde.confluent_header import header, message_path
from dagger.serde.types import VALIDITY_COLUMN, message_struct, timestamp_field

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dagger.config.model import StreamConfig
    from dagger.plugins.format import RecordDecoder, TableRead
    from dagger.schema.descriptor_sets import DescriptorSet


class ProtoReading(Format):
    """Protobuf records, decoded into the message's fields."""

    prunes_fields = True
    from_descriptor_sets = True
    generates = True
    spark_kafka_auto = True

    # --- what the stream reads ------------------------------------------------------------------------------------

    def message(self, stream: StreamConfig, descriptors: DescriptorSet) -> str | None:
        """The message the stream reads: ``INPUT_SCHEMA_PROTO_CLASS``, else (Confluent's format) the first message
        of the subject's file, as a record's ``[0]`` index names it."""
        if stream.format.INPUT_SCHEMA_PROTO_CLASS or stream_subject(stream) is None:
            return stream.format.INPUT_SCHEMA_PROTO_CLASS
        from dagger.serde.confluent_decode import message_at  # start-up: loads numpy, pyarrow

        return message_at(registered(stream, descriptors, "PROTOBUF").file_descriptors()[-1], (0,))

    def rowtime_field_number(self, stream: StreamConfig, descriptors: DescriptorSet) -> int | None:
        """The rowtime field's number: ``INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX``, or the number of the field
        ``INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME`` names."""
        name = self.rowtime_field(stream)
        if stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX is not None or not name:
            return stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX
        message = descriptors.find_message(self.message(stream, descriptors))
        field = message.fields_by_name.get(name)
        if field is None:
            raise DaggerConfigError(
                f"{key_of(stream, 'INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME')}: {message.full_name} has no field "
                f"{name!r}; its fields: {', '.join(f.name for f in message.fields)}"
            )
        return field.number

    def rowtime_field(self, stream: StreamConfig) -> str | None:
        return stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME

    def rowtime_source(self, stream: StreamConfig, descriptors: DescriptorSet) -> str | None:
        number = self.rowtime_field_number(stream, descriptors)
        if number is None:
            return None
        return timestamp_field(descriptors.find_message(self.message(stream, descriptors)), number).name

    def check_keys(self, stream: StreamConfig, what: str) -> None:
        if stream.format.INPUT_SCHEMA_WIRE_FORMAT != "confluent" and not stream.format.INPUT_SCHEMA_PROTO_CLASS:
            raise ValueError(f"INPUT_SCHEMA_PROTO_CLASS is required for {what}")
        if stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX is None and not self.rowtime_field(stream):
            raise ValueError(
                f"INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX (or INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME) is required "
                f"for {what}"
            )

    def check(self, stream: StreamConfig, descriptors: DescriptorSet) -> None:
        name = self.message(stream, descriptors)
        if name:
            message = descriptors.find_message(name)
            number = self.rowtime_field_number(stream, descriptors)
            if number is not None:
                timestamp_field(message, number, key_of(stream, "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"))

    def declares_table(self, stream: StreamConfig) -> bool:
        return bool(stream.format.INPUT_SCHEMA_PROTO_CLASS or stream_subject(stream))

    def record_struct(self, stream: StreamConfig, descriptors: DescriptorSet) -> StructType:
        return message_struct(descriptors.find_message(self.message(stream, descriptors)))

    def owner(self, stream: StreamConfig, descriptors: DescriptorSet) -> str:
        return self.message(stream, descriptors) or "PROTO"

    def describe(self, stream: StreamConfig) -> str:
        subject = stream_subject(stream)
        return stream.format.INPUT_SCHEMA_PROTO_CLASS or (f"PROTO ({subject[0]})" if subject else "")

    def pruned_fields(
        self, stream: StreamConfig, descriptors: DescriptorSet, used: set[str] | None
    ) -> list[str] | None:
        descriptor = descriptors.find_message(self.message(stream, descriptors))
        return source_fields(descriptor, used, self.rowtime_field_number(stream, descriptors))

    # --- the Kafka reader -----------------------------------------------------------------------------------------

    def reader_options(self, stream: StreamConfig, descriptors: DescriptorSet, env: FormatEnv) -> dict[str, Any]:
        message = self.message(stream, descriptors)
        descriptors.find_message(message)
        options: dict[str, Any] = {
            "descriptor_set_b64": base64.b64encode(descriptors.serialized).decode(),
            "message": message,
            "rowtime_field_number": self.rowtime_field_number(stream, descriptors),
            "rowtime_source": self.rowtime_source(stream, descriptors),
            "jvm": env.jvm_codecs,
            "confluent": None,
            "writers": None,
        }
        if stream_subject(stream) is not None:
            schemas = registered(stream, descriptors, "PROTOBUF")
            options["confluent"] = env.registry_for(stream_subject(stream)[1])
            options["writers"] = {
                str(i): [base64.b64encode(f).decode() for f in schemas.file_descriptors(i)] for i in schemas.schemas
            }
        return options

    @staticmethod
    def options_for(
        descriptor_set: bytes, message: str, rowtime_field_number: int | None = None, jvm: bool = False
    ) -> dict[str, Any]:
        """The reader options of plain records of ``message`` (a spec built by hand: tools and tests)."""
        fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
        source = None
        if rowtime_field_number is not None:
            source = timestamp_field(build_pool(fds).FindMessageTypeByName(message), rowtime_field_number).name
        return {
            "descriptor_set_b64": base64.b64encode(descriptor_set).decode(),
            "message": message,
            "rowtime_field_number": rowtime_field_number,
            "rowtime_source": source,
            "jvm": jvm,
            "confluent": None,
            "writers": None,
        }

    def decoder(self, options: dict[str, Any], fields: list[str] | None, rowtime: str) -> RecordDecoder:
        writers = {int(k): [base64.b64decode(f) for f in v] for k, v in (options["writers"] or {}).items()}
        if options["jvm"]:
            from dagger.serde.proto_jvm import ProtoFrames  # start-up: loads numpy, pyarrow

            return ProtoFrames(options["confluent"], writers, options["message"], options["rowtime_source"], rowtime)
        from dagger.serde.decode import ProtoDecoder  # start-up: loads numpy, pyarrow

        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(options["descriptor_set_b64"]))
        if fields is not None:
            fds = prune_message(fds, options["message"], fields)
        descriptor = build_pool(fds).FindMessageTypeByName(options["message"])
        inner = ProtoDecoder(descriptor, options["rowtime_field_number"], rowtime)
        if options["confluent"] is None:
            return inner
        from dagger.serde.confluent_decode import ConfluentDecoder  # start-up: loads numpy, pyarrow

        return ConfluentDecoder(inner, True, writers, options["confluent"], options["message"])

    def decodes_in_jvm(self, options: dict[str, Any]) -> bool:
        return bool(options["jvm"])

    def jvm_table(self, df: DataFrame, options: dict[str, Any], where: TableRead) -> DataFrame:
        from dagger.serde.proto_jvm import proto_table  # start-up: loads numpy, pyarrow

        return proto_table(
            df,
            options["descriptor_set_b64"],
            options["message"],
            where.table,
            where.policy,
            where.rowtime,
            options["rowtime_source"],
            where.fields,
            where.dead_letter,
        )

    def rowtime_reader(self, options: dict[str, Any], rowtime: str) -> Callable[[list[bytes | None]], list[int | None]]:
        # a few records: read by the Python decoder, even where the JVM decodes the stream
        only = self.decoder({**options, "jvm": False}, [options["rowtime_source"]], rowtime)
        return lambda values: self.rowtimes_of(only.decode(values), rowtime)

    # --- Spark's Kafka source -------------------------------------------------------------------------------------

    def spark_kafka_refusal(self, stream: StreamConfig, jvm_protobuf: bool) -> str | None:
        if jvm_protobuf:
            return None
        return (
            "protobuf is decoded by ptars in Python workers here (SPARK_PROTOBUF_CODEC=ptars, or Dagger's JVM "
            "classes are not on the class path), and real-time mode runs no Python; set SPARK_PROTOBUF_CODEC=jvm"
        )

    def spark_kafka_table(
        self,
        raw: DataFrame,
        stream: StreamConfig,
        descriptors: DescriptorSet,
        where: TableRead,
    ) -> DataFrame:
        """Dagger's decoder in the JVM (:func:`~dagger.formats.proto.kafka.kafka_table`)."""
        from dagger.formats.proto.kafka import kafka_table  # start-up: loads numpy, pyarrow

        message, rowtime_name, fields, paths = self._decoded_fields(stream, descriptors, where.fields)
        return kafka_table(raw, descriptors.serialized, message, fields, paths, where, rowtime_name)

    # --- Dagger's Kafka reader in the JVM ---------------------------------------------------------------------------

    def _decoded_fields(self, stream: StreamConfig, descriptors: DescriptorSet, fields: list[str] | None) -> Any:
        """The message, its rowtime field, the fields to decode (rowtime's source among them) and, for a stream in
        Confluent's wire format, each registered schema id's path to the message."""
        message = self.message(stream, descriptors)
        rowtime_name = self.rowtime_source(stream, descriptors)
        if fields is not None and rowtime_name is not None and rowtime_name not in fields:
            fields = [*fields, rowtime_name]
        paths = None
        if stream_subject(stream) is not None:
            schemas = registered(stream, descriptors, "PROTOBUF")
            found = {i: message_path(schemas.file_descriptors(i)[-1], message) for i in schemas.schemas}
            paths = {i: list(path) for i, path in found.items() if path is not None}
        return message, rowtime_name, fields, paths

    def jvm_reader_options(self, stream: StreamConfig, descriptors: DescriptorSet, where: TableRead) -> dict[str, str]:
        """What Dagger's Kafka reader in the JVM needs to decode the stream's records into its table as it reads
        them (``dagger/jvm/KafkaRangesReader.java``'s ``TableSpec``)."""
        message, rowtime_name, fields, paths = self._decoded_fields(stream, descriptors, where.fields)
        options = {
            "protobuf.message": message,
            "protobuf.descriptorSet": base64.b64encode(descriptors.serialized).decode(),
            "table.name": where.table,
            "table.policy": where.policy,
            "table.validity": VALIDITY_COLUMN,
            "table.rowtime": where.rowtime,
        }
        if rowtime_name is not None:
            options["table.rowtimeField"] = rowtime_name
        if fields is not None:
            options["protobuf.fields"] = json.dumps(fields)
        if paths is not None:
            options["protobuf.confluent"] = json.dumps({str(k): v for k, v in paths.items()})
        return options

    def jvm_reader_table(
        self, raw: DataFrame, stream: StreamConfig, descriptors: DescriptorSet, where: TableRead
    ) -> DataFrame:
        """The table from the rows of Dagger's Kafka reader in the JVM, decoded as read: its fields, the validity
        flag and rowtime (a stream with dead letters is read by Dagger's reader in Python workers:
        :func:`dagger.kafka.spark_connector.jvm_reader_refusals`)."""
        names = raw.columns[: raw.columns.index("__dagger_reason")]  # the decoded fields come first
        return raw.select(*[f"`{n}`" for n in names], VALIDITY_COLUMN, f"`{where.rowtime}`")

    # --- dagger test ----------------------------------------------------------------------------------------------

    def test_encoder(self, stream: StreamConfig, descriptors: DescriptorSet) -> Callable[[dict[str, Any]], bytes]:
        """A record in protobuf's JSON mapping (``json_format``: int64 as strings or numbers, timestamps as RFC 3339
        strings, enums by name), serialized as the stream's message (behind Confluent's header with the message's
        index path)."""
        name = self.message(stream, descriptors) or ""
        cls = message_factory.GetMessageClass(descriptors.find_message(name))
        prefix = b""
        if stream_subject(stream) is not None:
            schemas = registered(stream, descriptors, "PROTOBUF")
            path = message_path(schemas.file_descriptors()[-1], name)
            if path is None:
                raise ValueError(f"message {name} is not in the subject's latest schema")
            prefix = header(schemas.reader_id, path)

        def encode(record: dict[str, Any]) -> bytes:
            try:
                return prefix + json_format.ParseDict(record, cls()).SerializeToString()
            except json_format.ParseError as exc:
                raise ValueError(f"not a {name} in protobuf's JSON mapping: {exc}") from None

        return encode
