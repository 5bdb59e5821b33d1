"""The input data type contract and its registry: what a stream's ``INPUT_DATATYPE`` stands for, and how one
registers.

An input data type (a *format*) says how a stream's records are encoded and what its table holds: ``PROTO`` (a
message of the descriptor sets, ``INPUT_SCHEMA_PROTO_CLASS``), ``JSON`` (a JSON Schema) or ``AVRO``, each plain or
in Confluent's wire format (:mod:`dagger.formats`). The job asks the stream's format, never its name: the table's
columns (:meth:`Format.record_struct`), the checks before Spark starts, the fields a reader can skip, the decoder
of the Kafka reader's records, the decoding in the JVM of Spark's Kafka source (real-time mode), and the bytes of a
``dagger test`` case's records.

A format is one module and one registration::

    class CsvSettings(InputFormatSettings):
        INPUT_SCHEMA_CSV_COLUMNS: str = Field(description="name:type,... of the columns.")

    class Csv(Format):
        def record_struct(self, stream, descriptors): ...
        def reader_options(self, stream, descriptors, env): ...
        def decoder(self, options, fields, rowtime): ...
        def test_encoder(self, stream, descriptors): ...

    register_format("CSV", CsvSettings, Csv)

Its settings model holds its ``INPUT_SCHEMA_*`` keys; a stream's keys are validated against the model of its
``INPUT_DATATYPE`` as they are against its source's (:mod:`dagger.plugins.source`). The built-in formats register in
:mod:`dagger.formats`; installed packages through the ``dagger.formats`` entry-point group
(:mod:`dagger.plugins.registry`), which the Kafka reader's Python workers read too.

Where each method runs: every method runs on the driver but :meth:`Format.decoder` and :meth:`Format.encode_part`,
which run in the Python workers of the Kafka reader and writer (the decoder built once per worker and options;
workers are reused across tasks).

One module (about 330 lines): one plugin kind's contract, its reading half and its writing half (a sink's record
part), beside its registry, as every kind's contract is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from dagger.errors import DaggerConfigError
from dagger.plugins.registry import Plugin, Registry

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dagger.config.model import StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet


#: the column of every input table that says whether its record decoded (false: the invalid-record policy's)
VALIDITY_COLUMN = "__internal_validation_field__"


class InputFormatSettings(BaseModel):
    """Base of an input data type's settings model: its ``INPUT_SCHEMA_*`` keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


@dataclass(frozen=True)
class FormatEnv:
    """What a format's reader is given besides its stream: what every stream of the job shares."""

    #: the Schema Registry's client settings (a :class:`~dagger.schema.confluent.ConfluentSettings`' fields), for
    #: records in Confluent's wire format; None where the job names no registry
    registry: dict[str, Any] | None = None
    #: whether Dagger's codecs may decode in the JVM (``SPARK_PROTOBUF_CODEC=jvm`` and its classes on the class path)
    jvm_codecs: bool = False

    def registry_for(self, where: str) -> dict[str, Any]:
        """:attr:`registry`, or the config error naming ``where`` (a stream in Confluent's format) when unset."""
        if self.registry is None:
            raise DaggerConfigError(
                f"{where}: SCHEMA_REGISTRY_CONFLUENT_URL is not set: a stream with wire format 'confluent' needs the "
                "registry's URL (comma-separated URLs of a Confluent-compatible Schema Registry)"
            )
        return self.registry


@dataclass(frozen=True)
class TableRead:
    """What a format decoding in the JVM is told of the stream's table besides its records."""

    #: the stream's ``INPUT_SCHEMA_TABLE`` (errors and dead letters name it)
    table: str
    #: what an undecodable record becomes: ``fail`` (the query stops naming topic, partition and offset), ``drop``
    #: (counted, marked invalid) or ``dead-letter``
    policy: str
    #: the rowtime column's name
    rowtime: str
    #: the record fields to decode (None: all)
    fields: list[str] | None = None
    #: under ``dead-letter``: a ``DeadLetterSpec``'s fields, where undecodable records go
    dead_letter: dict[str, Any] | None = None


class Decoded(Protocol):
    """What a decoder returns for a batch of records (:class:`dagger.serde.decode.DecodeResult`)."""

    #: the table's columns for every record (an undecodable one: nulls), then the validity flag, then rowtime
    batch: pa.RecordBatch
    #: the positions of the undecodable records, and why each one is
    invalid: list[int]
    reasons: list[str]


class RecordDecoder(Protocol):
    """A format's decoder in the Kafka reader (runs in Python workers): records' bytes to the table's columns."""

    #: the table's Spark schema: the record's columns (the fields asked for), the validity flag, rowtime
    spark_schema: StructType
    #: the record field that becomes rowtime (its name), or None
    rowtime_source: str | None

    def decode(self, values: pa.BinaryArray | list[bytes | None]) -> Decoded: ...


class Format(ABC):
    """An input data type, registered under the ``INPUT_DATATYPE`` users write. One instance serves every stream
    of the type; a stream's own keys are ``stream.format`` (its settings model)."""

    #: the ``INPUT_DATATYPE`` it is registered under (set by :func:`register_format`)
    name: str = ""
    #: its settings model, when an entry point names the class (a ``register_format`` call names its own)
    settings_model: ClassVar[type[InputFormatSettings]] = InputFormatSettings
    #: whether its decoder can read only the fields the SQL names (``fields`` of :meth:`decoder`)
    prunes_fields: ClassVar[bool] = False
    #: whether its columns come from the descriptor sets (a refresh of the sets can change the table)
    from_descriptor_sets: ClassVar[bool] = False
    #: whether ``dagger generate`` can make random records of it
    generates: ClassVar[bool] = False
    #: whether ``SPARK_KAFKA_CONNECTOR=auto`` takes Spark's Kafka source for it: its decoding in the JVM reads
    #: every record as the Kafka reader's decoder does
    spark_kafka_auto: ClassVar[bool] = False

    def check_keys(self, stream: StreamConfig, what: str) -> None:  # noqa: B027 - optional hook
        """Raise ``ValueError`` naming a key the stream lacks or sets wrongly (while the config loads; ``what``
        names the stream: a source asks this of a stream it reads records of)."""

    def check(self, stream: StreamConfig, descriptors: DescriptorSet) -> None:
        """Resolve the stream's record type and rowtime field before Spark starts; raise
        :class:`~dagger.errors.DaggerConfigError` naming the key. By default: the columns can be made."""
        self.record_struct(stream, descriptors)

    def declares_table(self, stream: StreamConfig) -> bool:
        """Whether the stream's config names what its table holds (the SQL rewrite reads its columns)."""
        return True

    @abstractmethod
    def record_struct(self, stream: StreamConfig, descriptors: DescriptorSet) -> StructType:
        """The columns the stream's records have, before the validity flag and rowtime."""

    def owner(self, stream: StreamConfig, descriptors: DescriptorSet) -> str:
        """What the columns come from, for messages (``the JSON Schema``, a message's name)."""
        return f"the {self.name} schema"

    def describe(self, stream: StreamConfig) -> str:
        """What the stream's records are, for logs and metrics' labels."""
        return self.name

    def rowtime_field(self, stream: StreamConfig) -> str | None:
        """The record field that becomes rowtime, as the stream's keys name it (None: none, or only by number)."""
        return None

    def rowtime_source(self, stream: StreamConfig, descriptors: DescriptorSet) -> str | None:
        """The record field that becomes rowtime, by name, however the keys name it (None: the records have none)."""
        return self.rowtime_field(stream)

    def pruned_fields(
        self, stream: StreamConfig, descriptors: DescriptorSet, used: set[str] | None
    ) -> list[str] | None:
        """The fields the reader decodes when the SQL reads only ``used`` (lower-case column names; None: any);
        None: all of them. Only asked of a format that :attr:`prunes_fields`."""
        return None

    # --- the Kafka reader (Dagger's; micro-batches) --------------------------------------------------------------

    @abstractmethod
    def reader_options(self, stream: StreamConfig, descriptors: DescriptorSet, env: FormatEnv) -> dict[str, Any]:
        """What :meth:`decoder` needs, as JSON values (handed to every task of the reader), with ``rowtime_source``:
        the record field that becomes rowtime (None: the records have none; the reader aligns partitions in event
        time by it). Raise :class:`~dagger.errors.DaggerConfigError` naming the key where the stream cannot be
        read."""

    @abstractmethod
    def decoder(self, options: dict[str, Any], fields: list[str] | None, rowtime: str) -> RecordDecoder:
        """The decoder of the reader's records (runs in the Python workers); ``fields``: the fields to decode
        (None: all), ``rowtime``: the rowtime column's name."""

    def decodes_in_jvm(self, options: dict[str, Any]) -> bool:
        """Whether the reader's decoder only frames the records, and :meth:`jvm_table` decodes them in the JVM (the
        decoder then takes the records' coordinates for its errors)."""
        return False

    def jvm_table(self, df: DataFrame, options: dict[str, Any], where: TableRead) -> DataFrame:
        """The table from what a framing decoder emitted (:meth:`decodes_in_jvm`)."""
        raise NotImplementedError(f"{self.name} decodes in the reader")

    def rowtime_reader(self, options: dict[str, Any], rowtime: str) -> Callable[[list[bytes | None]], list[int | None]]:
        """The event time (epoch microseconds) of each of a few records, None where one does not decode: how the
        event-time probe reads them (runs in the Python workers). By default, the decoder's rowtime column."""
        decoder = self.decoder(options, None, rowtime)
        return lambda values: self.rowtimes_of(decoder.decode(values), rowtime)

    @staticmethod
    def rowtimes_of(result: Decoded, rowtime: str) -> list[int | None]:
        """The rowtime column of a decoded batch as epoch microseconds, None for an undecodable record."""
        times = result.batch.column(rowtime).cast("int64").to_pylist()
        valid = result.batch.column(len(result.batch.schema) - 2).to_pylist()
        return [t if ok else None for t, ok in zip(times, valid, strict=True)]

    # --- Spark's Kafka source (real-time mode, SPARK_KAFKA_CONNECTOR) ---------------------------------------------

    def spark_kafka_refusal(self, stream: StreamConfig, jvm_protobuf: bool) -> str | None:
        """Why Spark's Kafka source cannot decode the stream's records in the JVM (None: it can)."""
        return (
            f"INPUT_DATATYPE={self.name} records are read by our Kafka reader, which runs in micro-batches; real-time "
            "mode reads PROTO and JSON streams"
        )

    def spark_kafka_table(
        self,
        raw: DataFrame,
        stream: StreamConfig,
        descriptors: DescriptorSet,
        where: TableRead,
    ) -> DataFrame:
        """The table from Spark's Kafka source's rows (``value``, ``topic``, ``partition``, ``offset``), decoded in
        the JVM: the record's columns (``where.fields`` when given), the validity flag, rowtime; an undecodable
        record fails the query naming topic, partition and offset (``fail``), or is marked invalid."""
        raise NotImplementedError(f"{self.name} records are not decoded in the JVM")

    # --- Dagger's Kafka reader in the JVM (SPARK_KAFKA_CONNECTOR=jvm) ------------------------------------------------

    def jvm_reader_options(self, stream: StreamConfig, descriptors: DescriptorSet, where: TableRead) -> dict[str, str]:
        """What Dagger's Kafka reader in the JVM (``dagger/jvm/KafkaRanges*.java``) needs to decode the stream's
        records as it reads them, as its options; empty (the default): it hands the records' values over and
        :meth:`jvm_reader_table` decodes them (:meth:`spark_kafka_table`). Runs on the driver."""
        return {}

    def jvm_reader_table(
        self, raw: DataFrame, stream: StreamConfig, descriptors: DescriptorSet, where: TableRead
    ) -> DataFrame:
        """The table from the rows of Dagger's Kafka reader in the JVM: by default, its raw records (``value``,
        ``topic``, ``partition``, ``offset``) decoded as Spark's Kafka source's are."""
        return self.spark_kafka_table(raw.select("value", "topic", "partition", "offset"), stream, descriptors, where)

    # --- dagger test ----------------------------------------------------------------------------------------------

    @abstractmethod
    def test_encoder(self, stream: StreamConfig, descriptors: DescriptorSet) -> Callable[[dict[str, Any]], bytes]:
        """A case's record (a JSON object) as the bytes a broker would hold; raise ``ValueError`` naming what is
        wrong with a record the stream's schema cannot hold."""

    # --- a sink's records (the Kafka sink's SINK_KAFKA_DATA_TYPE and SINK_KAFKA_KEY_DATA_TYPE) ----------------------
    # ``part`` is one part of the records (value or key, :class:`dagger.kafka.sink.records.RecordPart`): its keys by
    # what they hold (``part.named("message")``), what it keeps (schema, header, columns)

    #: whether a sink can write records of it
    writes: ClassVar[bool] = False
    #: the registry's name of its schemas (``PROTOBUF``, ``JSON``, ``AVRO``), or None: none in a registry
    registry_type: ClassVar[str | None] = None
    #: whether every output column is matched to a field by name (a key needs no columns named)
    matches_columns_by_name: ClassVar[bool] = False
    #: the part's keys it reads, by what they hold (:data:`dagger.kafka.sink.records.KEYS`: ``message``,
    #: ``json_schema``, ``avro_schema``, ``record_name``); a part is given only these
    part_keys: ClassVar[tuple[str, ...]] = ()
    #: those of :attr:`part_keys` a value's records cannot be written without (checked as the config loads)
    required_part_keys: ClassVar[tuple[str, ...]] = ()
    #: whether its records are protobuf messages: the value's message then types a lookup's outputs, as Dagger's
    #: does (:meth:`~dagger.plugins.sink.SinkSettings.output_message`)
    writes_messages: ClassVar[bool] = False

    def resolve_part(self, part: Any, descriptors: DescriptorSet | None, schema_text: str | None) -> None:
        """Check and load the part's own keys before the job starts (``schema_text``: the schema key's value)."""
        raise DaggerConfigError(f"{part.named('data_type')}={self.name}: a sink cannot write {self.name} records")

    def registered_part(self, part: Any, schemas: Any) -> tuple[int, ...] | None:
        """The part takes the latest schema of its subject (``schemas``); the message-index path its header holds."""
        return None

    def key_columns(self, part: Any) -> tuple[str, ...] | None:
        """The output columns a key is made of when they are not named (None: they must be)."""
        return None

    def check_part(self, part: Any, taken: pa.Schema, key_columns: tuple[str, ...]) -> list[str]:
        """Why the output columns ``taken`` cannot be written as the part (empty: they can); a schema to derive is
        derived now. ``key_columns``: the key's, which a value's fixed schema need not hold."""
        return []

    def register_part(self, part: Any, registry: Any, offline: bool) -> tuple[int, tuple[int, ...] | None]:
        """Auto-register: the part's schema registered under its subject (``registry``: the registry's
        settings); its id and the message-index path. ``offline`` (``dagger test``): nothing registered, id 1."""
        raise NotImplementedError(self.name)

    def jvm_part(self, part: Any, schema: Any) -> Any:
        """The JVM column of each row's encoding from the output columns (``schema``), or None (encoded in
        Python by :meth:`encode_part`)."""
        return None

    def encode_part(self, part: Any, batch: pa.RecordBatch, jvm_column: str) -> pa.BinaryArray:
        """The part of each row of ``batch`` (the output columns and the sink's JVM ones; ``jvm_column``: this
        part's), Confluent's header in front where it has one; a row that cannot be encoded refuses the batch
        (:class:`~dagger.sinks.rejected.RowsRefused`). Runs in the Python workers."""
        raise NotImplementedError(self.name)

    def describe_part(self, part: Any) -> str:
        """What the part's records are, for logs."""
        return self.name

    def part_reader(self, part: Any) -> Callable[[bytes], dict[str, Any]]:
        """A written record (without Confluent's header) read back as an object (``dagger test``)."""
        raise NotImplementedError(self.name)

    def part_writer(self, part: Any) -> Callable[[dict[str, Any]], bytes]:
        """An expected record written as the part would be (``dagger test`` compares it read back)."""
        raise NotImplementedError(self.name)

    def spark_sink_refusal(
        self, key: str, jvm_protobuf: bool, protobuf_only: bool, real_time: bool = False
    ) -> str | None:
        """Why Spark's Kafka sink cannot encode the part in the JVM (``key``: the data type's key;
        ``protobuf_only``: ``SPARK_KAFKA_CONNECTOR=auto``'s choice; ``real_time``: for real-time mode's checks)."""
        if real_time:
            return f"{key}={self.name} records are written by the micro-batch sink; real-time mode writes PROTO or JSON"
        return f"{key}={self.name} is encoded by Dagger's writer"

    def spark_part(self, part: Any, df: DataFrame, sink_name: str, real_time: bool) -> Any:
        """The part of each record as Spark's Kafka sink writes it: a binary column of ``df``'s rows."""
        raise NotImplementedError(self.name)


#: the input data types by ``INPUT_DATATYPE``; each registration's constructor returns the :class:`Format`
FORMATS: Registry[Callable[[], Format]] = Registry(
    kind="input data type",
    group="dagger.formats",
    settings_base=InputFormatSettings,
    contract=Format,
    key_prefixes=("INPUT_SCHEMA_",),
    reserved=frozenset({"INPUT_SCHEMA_TABLE"}),
)
_instances: dict[str, Format] = {}


def register_format(
    name: str, settings: type[InputFormatSettings], build: Callable[[], Format], summary: str | None = None
) -> Plugin:
    """Register an input data type under ``name`` (upper case, what users write in ``INPUT_DATATYPE``);
    ``build()`` returns the :class:`Format`."""
    _instances.pop(name, None)
    return FORMATS.register(name, settings, build, summary)


def format_named(name: str) -> Format:
    """The format registered under ``name`` (built once)."""
    if name not in _instances:
        plugin = FORMATS.get(name)
        if plugin is None:
            raise KeyError(
                f"INPUT_DATATYPE {name!r} is not registered; registered: {', '.join(sorted(FORMATS.plugins()))}"
            )
        built = plugin.build()
        built.name = name
        _instances[name] = built
    return _instances[name]


def format_of(stream: StreamConfig) -> Format:
    """The registered format of a stream (its ``INPUT_DATATYPE``)."""
    return format_named(stream.INPUT_DATATYPE)
