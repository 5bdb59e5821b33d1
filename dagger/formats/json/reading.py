"""How JSON streams are read: the table's columns, the checks, the Kafka reader's decoder, the decoding in the JVM
and ``dagger test``'s records (the reading half of :class:`dagger.formats.json.Json`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.formats.json.schema import JsonSchemaError, json_struct
from dagger.formats.records import key_of, registered, stream_subject
from dagger.plugins.format import Format, FormatEnv
from dagger.serde.confluent_header import header
from dagger.session.pandas_free import lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dagger.config.model import StreamConfig
    from dagger.plugins.format import RecordDecoder, TableRead
    from dagger.schema.descriptor_sets import DescriptorSet


class JsonReading(Format):
    """JSON records, read by the JSON Schema's properties."""

    def schema(self, stream: StreamConfig, descriptors: DescriptorSet) -> str:
        """The stream's JSON Schema: ``INPUT_SCHEMA_JSON_SCHEMA``, or the subject's latest version."""
        if stream_subject(stream) is None:
            return stream.format.INPUT_SCHEMA_JSON_SCHEMA or ""
        return registered(stream, descriptors, "JSON").reader["schema"]

    def rowtime_field(self, stream: StreamConfig) -> str | None:
        return (
            stream.format.INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME
            or stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME
        )

    def record_struct(self, stream: StreamConfig, descriptors: DescriptorSet) -> StructType:
        return json_struct(self.schema(stream, descriptors), key_of(stream, "INPUT_SCHEMA_JSON_SCHEMA"))

    def owner(self, stream: StreamConfig, descriptors: DescriptorSet) -> str:
        return "the JSON Schema"

    def describe(self, stream: StreamConfig) -> str:
        subject = stream_subject(stream)
        return f"JSON ({subject[0]})" if subject else "JSON"

    def check(self, stream: StreamConfig, descriptors: DescriptorSet) -> None:
        from dagger.formats.json.decode import rowtime_type  # start-up: loads google, numpy, pyarrow

        if stream_subject(stream) is None and not stream.format.INPUT_SCHEMA_JSON_SCHEMA:
            raise DaggerConfigError(
                f"{key_of(stream, 'INPUT_SCHEMA_JSON_SCHEMA')} is required with INPUT_DATATYPE JSON"
            )
        key = key_of(stream, "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME")
        if not self.rowtime_field(stream):
            raise DaggerConfigError(f"{key} is required with INPUT_DATATYPE JSON")
        try:
            rowtime_type(self.record_struct(stream, descriptors), self.rowtime_field(stream), key)
        except JsonSchemaError as exc:
            raise DaggerConfigError(str(exc)) from None

    # --- the Kafka reader -----------------------------------------------------------------------------------------

    def reader_options(self, stream: StreamConfig, descriptors: DescriptorSet, env: FormatEnv) -> dict[str, Any]:
        options: dict[str, Any] = {
            "schema": self.schema(stream, descriptors),
            "rowtime_source": self.rowtime_field(stream),
            "confluent": None,
            "writers": None,
        }
        if stream_subject(stream) is not None:
            options["confluent"] = env.registry_for(stream_subject(stream)[1])
            options["writers"] = {str(i): [] for i in registered(stream, descriptors, "JSON").schemas}
        return options

    def decoder(self, options: dict[str, Any], fields: list[str] | None, rowtime: str) -> RecordDecoder:
        from dagger.formats.json.decode import JsonDecoder  # start-up: loads numpy, pyarrow

        inner = JsonDecoder(options["schema"] or "{}", options["rowtime_source"], rowtime, fields)
        if options["confluent"] is None:
            return inner
        from dagger.serde.confluent_decode import ConfluentDecoder  # start-up: loads numpy, pyarrow

        writers: dict[int, list[bytes]] = {int(k): [] for k in options["writers"] or {}}
        return ConfluentDecoder(inner, False, writers, options["confluent"])

    # --- Spark's Kafka source -------------------------------------------------------------------------------------

    def spark_kafka_refusal(self, stream: StreamConfig, jvm_protobuf: bool) -> str | None:
        if stream.format.INPUT_SCHEMA_WIRE_FORMAT == "plain":
            return None
        return (
            "JSON records in Confluent's wire format are read by our Kafka reader, which runs in micro-batches; "
            "real-time mode reads plain JSON, and protobuf plain or in Confluent's format"
        )

    def spark_kafka_table(
        self,
        raw: DataFrame,
        stream: StreamConfig,
        descriptors: DescriptorSet,
        where: TableRead,
    ) -> DataFrame:
        """``from_json`` in the JVM."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import TimestampType

        from dagger.serde.jvm_frames import record_at  # start-up: loads numpy, pyarrow
        from dagger.serde.types import VALIDITY_COLUMN  # start-up: loads google

        record = self.record_struct(stream, descriptors)
        parsed = raw.select(
            F.from_json(F.col("value").cast("string"), record, {"mode": "PERMISSIVE"}).alias("r"),
            "topic",
            "partition",
            "offset",
        )
        time_field = stream.format.INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME
        valid = F.col("r").isNotNull()
        if time_field:
            valid = valid & F.col(f"r.`{time_field}`").isNotNull()
        if where.policy == "fail":
            message = F.concat(
                record_at(stream.INPUT_SCHEMA_TABLE),
                lit(
                    " cannot be decoded as JSON of INPUT_SCHEMA_JSON_SCHEMA. Set SOURCE_KAFKA_INVALID_RECORD_POLICY to "
                    "'drop' to keep the job running past undecodable records."
                ),
            )
            parsed = parsed.where(F.assert_true(valid, message).isNull())
        columns = [F.col(f"r.`{f.name}`").alias(f.name) for f in record.fields]
        if time_field is None:
            event = lit(None).cast(TimestampType())
        elif isinstance(record[time_field].dataType, TimestampType):
            event = F.col(f"r.`{time_field}`")
        else:  # a number of epoch seconds, as Dagger reads one
            event = F.timestamp_micros((F.col(f"r.`{time_field}`") * 1_000_000).cast("long"))
        validity = F.coalesce(valid, lit(False)).alias(VALIDITY_COLUMN)
        return parsed.select(*columns, validity, event.alias(where.rowtime))

    # --- dagger test ----------------------------------------------------------------------------------------------

    def test_encoder(self, stream: StreamConfig, descriptors: DescriptorSet) -> Callable[[dict[str, Any]], bytes]:
        """The record's JSON text (behind Confluent's header)."""
        prefix = b""
        if stream_subject(stream) is not None:
            prefix = header(registered(stream, descriptors, "JSON").reader_id)
        return lambda record: prefix + json.dumps(record).encode()
