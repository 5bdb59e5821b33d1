"""What the Kafka sink writes as one part of its records, the value or the key (:class:`RecordPart`): the data
type (protobuf, JSON, Avro), the wire format (bare, or Confluent's with a schema in the registry), the schema and
the output columns the part takes; and the encoding of a batch's rows into that part, column-wise.

Where each runs: :meth:`RecordPart.of`, :meth:`~RecordPart.check` and :meth:`~RecordPart.prepare` on the driver
when the job starts; :meth:`~RecordPart.encode` in the sink's writers, on the executors.

The encoding itself is the format's (:mod:`dagger.formats`: ``writing.py`` of each), which the part asks; a
subject's schema looked up in what the job read at start (:func:`looked_up`) or registered at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import dagger.formats  # noqa: F401 - registers the built-in formats, in a Python worker too
from dagger.errors import DaggerConfigError
from dagger.plugins.format import FORMATS, Format, format_named
from dagger.plugins.sink import JVM_COLUMN_PREFIX
from dagger.schema.confluent import ConfluentSettings
from dagger.serde.confluent_header import header

if TYPE_CHECKING:
    from dagger.schema.descriptor_sets import DescriptorSet

#: the keys that set each part, by what they hold
KEYS = {
    "value": {
        "data_type": "SINK_KAFKA_DATA_TYPE",
        "wire_format": "SINK_KAFKA_WIRE_FORMAT",
        "message": "SINK_KAFKA_PROTO_MESSAGE",
        "subject": "SINK_KAFKA_SCHEMA_SUBJECT",
        "auto_register": "SINK_KAFKA_SCHEMA_AUTO_REGISTER",
        "record_name": "SINK_KAFKA_AVRO_RECORD_NAME",
        "avro_schema": "SINK_KAFKA_AVRO_SCHEMA",
        "json_schema": "SINK_KAFKA_JSON_SCHEMA",
    },
    "key": {
        "data_type": "SINK_KAFKA_KEY_DATA_TYPE",
        "wire_format": "SINK_KAFKA_KEY_WIRE_FORMAT",
        "message": "SINK_KAFKA_PROTO_KEY",
        "subject": "SINK_KAFKA_KEY_SCHEMA_SUBJECT",
        "auto_register": "SINK_KAFKA_KEY_SCHEMA_AUTO_REGISTER",
        "record_name": "SINK_KAFKA_KEY_AVRO_RECORD_NAME",
        "avro_schema": "SINK_KAFKA_KEY_AVRO_SCHEMA",
        "json_schema": "SINK_KAFKA_KEY_JSON_SCHEMA",
        "columns": "SINK_KAFKA_KEY_COLUMNS",
    },
}


def writer(data_type: str, key: str = "SINK_KAFKA_DATA_TYPE") -> Format:
    """The registered format a part's data type names, or the config error naming ``key`` and the formats a sink
    writes."""
    if FORMATS.get(data_type) is None or not format_named(data_type).writes:
        accepted = sorted(name for name in FORMATS.plugins() if format_named(name).writes)
        raise ValueError(f"{key}={data_type!r}: a sink writes {', '.join(accepted)}")
    return format_named(data_type)


@dataclass
class RecordPart:
    """One part of the sink's records: how it is encoded (its format, :mod:`dagger.formats`), and from which output
    columns. The format does the encoding; the part holds what it was told and what it keeps."""

    part: str  # "value" or "key"
    data_type: str  # the format: PROTO, JSON, AVRO or a registered one that writes
    confluent: bool  # Confluent's wire format (a registry's schema id in front of each record)
    subject: str | None = None
    auto_register: bool = False
    record_name: str = "dagger.Record"
    message: str | None = None  # PROTO: the message's full name
    columns: tuple[str, ...] | None = None  # the output columns it takes; None: all (PROTO: matched by name)
    avro_schema: str | None = None
    json_schema: str | None = None
    schema_id: int | None = None
    header: bytes | None = None  # Confluent's header in front of each record
    descriptor_set_b64: str = ""  # PROTO: the descriptor sets holding the message
    jvm_protobuf: bool = True  # PROTO: encoded in the JVM (SPARK_PROTOBUF_CODEC=jvm), when its classes are there

    @property
    def format(self) -> Format:
        """The format that encodes the part (looked up by name, on the executors too)."""
        return format_named(self.data_type)

    def named(self, what: str) -> str:
        """The key that sets ``what`` of this part."""
        return KEYS[self.part][what]

    # -- driver side, at start ----------------------------------------------------------------------------

    @classmethod
    def of(cls, settings: Any, part: str, descriptors: DescriptorSet | None) -> RecordPart | None:
        """The ``part`` (value or key) a sink's settings describe, its schema looked up or loaded; None: the
        records have no key."""
        keys = KEYS[part]
        if part == "key":
            if not settings.writes_keys:
                return None
            columns = [c.strip() for c in (settings.SINK_KAFKA_KEY_COLUMNS or "").split(",") if c.strip()]
            data_type = settings.key_data_type
        else:
            columns, data_type = [], settings.SINK_KAFKA_DATA_TYPE
        given = {
            "message": settings.part_message(part),
            "json_schema": getattr(settings, keys["json_schema"]),
            "record_name": getattr(settings, keys["record_name"]),
        }
        read = format_named(data_type).part_keys  # a part holds only the keys its format reads
        confluent, auto, subject, _ = settings.registry(part)
        out = cls(
            part,
            data_type,
            confluent,
            subject=subject if confluent else None,
            auto_register=auto,
            columns=tuple(columns) or None,
            **{what: value for what, value in given.items() if what in read and value is not None},
        )
        out._resolve(descriptors, getattr(settings, keys["avro_schema"]) if "avro_schema" in read else None)
        return out

    def _resolve(self, descriptors: DescriptorSet | None, schema_text: str | None) -> None:
        self.format.resolve_part(self, descriptors, schema_text)
        if not self.confluent or self.auto_register:
            return
        schemas = looked_up(descriptors, self.subject, self.data_type, self.named("subject"))
        self.schema_id = schemas.reader_id
        self.header = header(self.schema_id, self.format.registered_part(self, schemas))

    def _taken(self, schema: pa.Schema) -> pa.Schema | str:
        """The output columns this part takes (a schema), or why they cannot be had."""
        columns = self.columns
        if columns is None and self.part == "key" and not self.format.matches_columns_by_name:
            columns = self.format.key_columns(self)
            if columns is None:
                return (
                    f"{self.named('columns')}: name the output columns the key is made of ({', '.join(schema.names)})"
                )
        if columns is None:
            return schema
        missing = [c for c in columns if c not in schema.names]
        if missing:
            return f"{self.named('columns')}: {', '.join(missing)} not among the output columns ({', '.join(schema.names)})"
        self.columns = columns
        return pa.schema([schema.field(c) for c in columns])

    def check(self, schema: pa.Schema, key_columns: tuple[str, ...] = ()) -> list[str]:
        """Why the output (``schema``) cannot be written as this part (empty when it can); a schema to derive is
        derived now. ``key_columns``: the key's, which a value's fixed schema need not hold."""
        taken = self._taken(schema)
        if isinstance(taken, str):
            return [taken]
        return self.format.check_part(self, taken, key_columns)

    def prepare(self, registry: dict[str, Any], offline: bool = False) -> None:
        """Auto-register: the part's schema is registered under its subject, and its id goes in the header.
        ``offline`` (``dagger test``): nothing is registered; the schema takes id 1."""
        if not self.confluent or not self.auto_register:
            return
        self.schema_id, path = self.format.register_part(self, ConfluentSettings(**registry), offline)
        self.header = header(self.schema_id, path)

    def jvm_column(self, schema: Any) -> Any:
        """The JVM column of each row's encoding, from the output columns (``schema``), or None (the format
        encodes in Python): AVRO, its datum (Spark's ``to_avro``); PROTO, a struct of its record and why it cannot
        be written (Dagger's encoder in the JVM, unless ``SPARK_PROTOBUF_CODEC=ptars`` or its classes are
        missing)."""
        return self.format.jvm_part(self, schema)

    def describe(self) -> str:
        what = self.format.describe_part(self)
        of = f" of {', '.join(self.columns)}" if self.columns and self.part == "key" else ""
        return f"{what}{of}" + (f" (subject {self.subject})" if self.subject else "")

    # -- executor side ------------------------------------------------------------------------------------

    def encode(self, batch: pa.RecordBatch, jvm_column: str) -> pa.BinaryArray:
        """The part of each row of ``batch`` (the output and the sink's JVM columns); ``jvm_column``: the name of
        this part's JVM column. A row that cannot be encoded refuses the batch (:class:`RowsRefused`)."""
        return self.format.encode_part(self, batch, jvm_column)

    def taken(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The output columns of ``batch`` the part takes (without the sink's JVM columns), in its order."""
        names = [n for n in batch.schema.names if not n.startswith(JVM_COLUMN_PREFIX)]
        taken = list(self.columns) if self.columns is not None else names
        if taken != batch.schema.names:
            batch = pa.RecordBatch.from_arrays([batch.column(n) for n in taken], names=taken)
        return batch


def looked_up(descriptors: DescriptorSet | None, subject: str, data_type: str, key: str) -> Any:
    """The subject's schemas the job read at start (:class:`~dagger.schema.confluent.SubjectSchemas`), checked to
    hold the data type's."""
    schemas = (descriptors.subjects if descriptors is not None else {}).get(subject)
    wanted = format_named(data_type).registry_type
    if schemas is None or schemas.schema_type != wanted:
        held = f"holds {schemas.schema_type} schemas" if schemas is not None else "was not read"
        raise DaggerConfigError(f"{key}: subject {subject!r} {held}; data type {data_type} needs a {wanted} one")
    return schemas
