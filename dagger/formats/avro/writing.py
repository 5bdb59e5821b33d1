"""How a sink writes AVRO records: each row's datum by Spark's ``to_avro`` in the JVM, against the part's schema
(given, the subject's latest, or derived from the output columns), then framed in the Python workers (the writing
half of :class:`dagger.formats.avro.Avro`)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from dagger.formats.avro.encode import avro_column, derived_schema, fit_problems, null_fields
from dagger.formats.avro.types import avro_struct
from dagger.formats.records import load_text
from dagger.schema.confluent import register
from dagger.serde.confluent_header import framed
from dagger.sinks.readback import avro_value, plain
from dagger.sinks.rejected import RowsRefused

if TYPE_CHECKING:
    import pyarrow as pa

    from dagger.schema.descriptor_sets import DescriptorSet


class AvroWriting:
    """AVRO records as a sink's record part (the Kafka sink's value or key)."""

    writes = True
    registry_type = "AVRO"
    part_keys = ("avro_schema", "record_name")

    def resolve_part(self, part: Any, descriptors: DescriptorSet | None, schema_text: str | None) -> None:
        if not part.confluent and schema_text:
            part.avro_schema = load_text(schema_text, part.named("avro_schema"))

    def registered_part(self, part: Any, schemas: Any) -> tuple[int, ...] | None:
        part.avro_schema = schemas.avro_schema()
        return None

    def key_columns(self, part: Any) -> tuple[str, ...] | None:
        if part.avro_schema is not None and not part.auto_register:
            return tuple(avro_struct(part.avro_schema, "the key's Avro schema").fieldNames())
        return None

    def check_part(self, part: Any, taken: pa.Schema, key_columns: tuple[str, ...]) -> list[str]:
        if part.avro_schema is None or (part.auto_register and part.schema_id is None):
            try:
                part.avro_schema = derived_schema(taken, part.record_name)
            except ValueError as exc:
                return [f"{part.named('data_type')}=AVRO: {exc}"]
            return []
        where = f"subject {part.subject!r}" if part.subject else part.named("avro_schema")
        return fit_problems(part.avro_schema, taken, where, set(key_columns))

    def register_part(self, part: Any, registry: Any, offline: bool) -> tuple[int, tuple[int, ...] | None]:
        return (1 if offline else register(registry, part.subject, part.avro_schema, "AVRO")), None

    def jvm_part(self, part: Any, schema: Any) -> Any:
        """Its datum (Spark's ``to_avro``)."""
        return avro_column(part.avro_schema)

    def encode_part(self, part: Any, batch: pa.RecordBatch, jvm_column: str) -> pa.BinaryArray:
        values = batch.column(jvm_column)
        if values.null_count:
            rows = [int(i) for i in pc.indices_nonzero(pc.is_null(values)).to_pylist()]
            reason = null_fields(part.avro_schema, batch, rows)
            raise RowsRefused("INVALID_MESSAGE_ERROR", reason if part.part == "value" else f"key: {reason}", rows)
        return framed(values, part.header)

    def part_reader(self, part: Any) -> Callable[[bytes], dict[str, Any]]:
        """Read by fastavro with the part's schema (timestamps as ISO text, bytes as base64)."""
        import fastavro

        schema = fastavro.parse_schema(json.loads(part.avro_schema or "{}"))
        return lambda body: plain(fastavro.schemaless_reader(io.BytesIO(body), schema, None))

    def part_writer(self, part: Any) -> Callable[[dict[str, Any]], bytes]:
        import fastavro

        schema = fastavro.parse_schema(json.loads(part.avro_schema or "{}"))

        def write(record: dict[str, Any]) -> bytes:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, schema, avro_value(schema, record))
            return out.getvalue()

        return write
