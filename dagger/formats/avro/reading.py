"""How AVRO streams are read: the table's columns, the checks, the Kafka reader's decoder, the decoding in the JVM
and ``dagger test``'s records (the reading half of :class:`dagger.formats.avro.Avro`)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.formats.avro.types import AvroSchemaError, avro_struct
from dagger.formats.records import key_of, load_text, registered, stream_subject
from dagger.plugins.format import Format, FormatEnv
from dagger.serde.confluent_header import header
from dagger.sinks.readback import avro_value

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dagger.config.model import StreamConfig
    from dagger.plugins.format import RecordDecoder, TableRead
    from dagger.schema.descriptor_sets import DescriptorSet


class AvroReading(Format):
    """Avro records, decoded in the JVM against the reader schema."""

    prunes_fields = True

    def schemas(self, stream: StreamConfig, descriptors: DescriptorSet) -> tuple[str, dict[int, str]]:
        """The stream's reader schema and its writer schemas by id (a plain stream: its schema, id 0)."""
        if stream_subject(stream) is None:
            text = load_text(stream.format.INPUT_SCHEMA_AVRO_SCHEMA or "", key_of(stream, "INPUT_SCHEMA_AVRO_SCHEMA"))
            return text, {0: text}
        schemas = registered(stream, descriptors, "AVRO")
        return schemas.avro_schema(), {i: schemas.avro_schema(i) for i in schemas.schemas}

    def rowtime_field(self, stream: StreamConfig) -> str | None:
        return stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME

    def record_struct(self, stream: StreamConfig, descriptors: DescriptorSet) -> StructType:
        try:
            return avro_struct(self.schemas(stream, descriptors)[0], key_of(stream, "INPUT_SCHEMA_AVRO_SCHEMA"))
        except AvroSchemaError as exc:
            raise DaggerConfigError(str(exc)) from None

    def owner(self, stream: StreamConfig, descriptors: DescriptorSet) -> str:
        return "the Avro schema"

    def describe(self, stream: StreamConfig) -> str:
        subject = stream_subject(stream)
        return f"AVRO ({subject[0]})" if subject else "AVRO"

    def check(self, stream: StreamConfig, descriptors: DescriptorSet) -> None:
        struct = self.record_struct(stream, descriptors)
        field = self.rowtime_field(stream)
        key = key_of(stream, "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME")
        if field is None:
            raise DaggerConfigError(f"{key} is required with INPUT_DATATYPE AVRO: the field that becomes rowtime")
        if field not in struct.fieldNames():
            raise DaggerConfigError(
                f"{key}: the Avro schema has no field {field!r}; its fields: {', '.join(struct.fieldNames())}"
            )
        if struct[field].dataType.typeName() not in ("timestamp", "timestamp_ntz"):
            raise DaggerConfigError(
                f"{key}: field {field!r} is {struct[field].dataType.simpleString()}; the rowtime must be a "
                "timestamp (logicalType timestamp-millis or timestamp-micros)"
            )

    def pruned_fields(
        self, stream: StreamConfig, descriptors: DescriptorSet, used: set[str] | None
    ) -> list[str] | None:
        """The reader schema skips the fields the SQL does not name."""
        names = self.record_struct(stream, descriptors).fieldNames()
        rowtime = self.rowtime_field(stream)
        keep = [n for n in names if used is not None and (n.lower() in used or n == rowtime)]
        return keep if used is not None and len(keep) < len(names) else None

    # --- the Kafka reader -----------------------------------------------------------------------------------------

    def reader_options(self, stream: StreamConfig, descriptors: DescriptorSet, env: FormatEnv) -> dict[str, Any]:
        reader, writers = self.schemas(stream, descriptors)
        return {
            "reader": reader,
            "writers": {str(k): v for k, v in writers.items()},
            "rowtime_source": self.rowtime_field(stream),
            "confluent": env.registry_for(stream_subject(stream)[1]) if stream_subject(stream) is not None else None,
        }

    def decoder(self, options: dict[str, Any], fields: list[str] | None, rowtime: str) -> RecordDecoder:
        from dagger.formats.avro.decode import AvroFrames  # start-up: loads numpy, pyarrow

        writers = {int(k): v for k, v in options["writers"].items()}
        return AvroFrames(writers, options["reader"], options["confluent"], options["rowtime_source"], rowtime)

    def decodes_in_jvm(self, options: dict[str, Any]) -> bool:
        return True

    def jvm_table(self, df: DataFrame, options: dict[str, Any], where: TableRead) -> DataFrame:
        from dagger.formats.avro.decode import avro_table  # start-up: loads numpy, pyarrow

        return avro_table(
            df,
            {int(k): v for k, v in options["writers"].items()},
            options["reader"],
            where.table,
            where.policy,
            where.rowtime,
            options["rowtime_source"],
            where.fields,
            where.dead_letter,
            framed=options["confluent"] is not None,
        )

    def rowtime_reader(self, options: dict[str, Any], rowtime: str) -> Callable[[list[bytes | None]], list[int | None]]:
        return self.decoder(options, None, rowtime).rowtimes

    # --- dagger test ----------------------------------------------------------------------------------------------

    def test_encoder(self, stream: StreamConfig, descriptors: DescriptorSet) -> Callable[[dict[str, Any]], bytes]:
        """The record as fastavro writes it with the stream's schema (the subject's latest version, behind
        Confluent's header)."""
        import fastavro

        reader, _ = self.schemas(stream, descriptors)
        schema = fastavro.parse_schema(json.loads(reader))
        prefix = b""
        if stream_subject(stream) is not None:
            prefix = header(registered(stream, descriptors, "AVRO").reader_id)

        def encode(record: dict[str, Any]) -> bytes:
            out = io.BytesIO()
            try:
                fastavro.schemaless_writer(out, schema, avro_value(schema, record))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise ValueError(f"not a record of the stream's Avro schema: {exc}") from None
            return prefix + out.getvalue()

        return encode
