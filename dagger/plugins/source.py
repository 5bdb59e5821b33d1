"""The source contract and its registry: what a stream's ``SOURCE_NAME`` stands for, and how a source registers.

A source turns one ``STREAMS`` entry into a DataFrame with the table's columns (message fields,
``__internal_validation_field__`` and rowtime) and answers what the planner and the runner ask of a stream:
whether it ends, what a bounded run reads (its fingerprint), where it reads from (``dagger validate``), and what
to do once a live run stops (the Kafka source commits its final offsets). The job asks these questions instead
of testing which source a stream has. Every method runs on the driver.

A source is one module and one registration per ``SOURCE_NAME`` it serves::

    class WebhookSourceSettings(SourceSettings):
        SOURCE_WEBHOOK_URL: str = Field(description="Where records are polled from.")

    class WebhookSource(Source):
        names = ("WEBHOOK_SOURCE",)
        source_type = "UNBOUNDED"
        ...

    register_source("WEBHOOK_SOURCE", WebhookSourceSettings, WebhookSource)

The settings model holds the source's own ``SOURCE_<NAME>_*`` keys (typed, with defaults and a description each:
the config reference is generated from it). ``STREAMS`` entries stay flat, as in Dagger: a stream's keys are
validated against the model of its ``SOURCE_NAME`` and of its ``INPUT_DATATYPE`` (:mod:`dagger.job.binding`);
a key no source knows is an error naming the closest one, a key of another source is accepted and ignored.
Installed packages register through the ``dagger.sources`` entry-point group (:mod:`dagger.plugins.registry`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from dagger.plugins.registry import Plugin, Registry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet

#: keys every stream has, whatever its source and input data type (:class:`dagger.config.model.StreamConfig`)
COMMON_KEYS = frozenset({"INPUT_SCHEMA_TABLE", "INPUT_DATATYPE", "SOURCE_DETAILS"})


class SourceSettings(BaseModel):
    """Base of a source's settings model: its ``SOURCE_*`` keys, typed, each with a default and a description."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: keys it accepts and does nothing with, each with why (``dagger validate`` names those a config sets;
    #: listed in docs/config.md)
    ignored_keys: ClassVar[dict[str, str]] = {}

    def require(self, what: str, *keys: str) -> None:
        """Raise the config error for the first of ``keys`` left empty (``what``: the stream, for the message)."""
        for key in keys:
            if getattr(self, key) in (None, "", []):
                raise ValueError(f"{key} is required for {what}")


@dataclass
class SourceOptions:
    """Run-wide source settings that are not part of a stream's own config."""

    commit_offsets: bool = True
    bounded: bool = False  # every stream has an end: the job runs as one batch query
    from_ms: int | None = None  # dagger run --from: every Kafka stream starts here
    to_ms: int | None = None  # dagger run --to: every Kafka stream stops here (exclusive)
    fields: dict[str, list[str]] | None = None  # table -> the message fields to decode (absent: all)
    event_time: bool = True  # the job's results depend on the watermark: read Kafka partitions aligned in event time
    #: a file on the driver's machine whose presence means "admit no new input": the runner stopping the job
    #: creates it so that the running micro-batch is the last one (a live source then plans none)
    hold_file: str | None = None
    #: read with Spark's own Kafka source where the stream allows it (``SPARK_KAFKA_CONNECTOR``, real-time mode);
    #: a source that cannot (``supports_real_time`` off) reads as always
    spark_kafka: bool = False
    #: Dagger's reader with its records read and decoded in the JVM (``SPARK_KAFKA_CONNECTOR=jvm``; with
    #: ``spark_kafka``: the sink is Spark's Kafka sink)
    jvm_reader: bool = False
    #: Spark's real-time mode (with ``spark_kafka``): no bound on a micro-batch's records
    real_time: bool = False
    #: Dagger's protobuf codec runs in the JVM (``SPARK_PROTOBUF_CODEC`` and its classes on the class path)
    jvm_protobuf: bool = True
    #: ask the brokers for the group's offsets where a stream starts there (``dagger validate`` does not)
    resolve_offsets: bool = True


@dataclass(frozen=True)
class SourceEnv:
    """What a source is given besides its stream: what every stream of the job shares."""

    #: the job's Spark session (None where the job is planned without Spark: :meth:`Source.check_reading`)
    spark: SparkSession | None
    #: the job's own keys (the rowtime column, micro-batch bounds, the registry, dead letters)
    config: JobConfig
    #: the descriptor sets and registry subjects the job read at start
    descriptors: DescriptorSet
    #: the run's settings that are not a stream's
    options: SourceOptions = field(default_factory=SourceOptions)


class Source(ABC):
    """A kind of input stream, registered under the ``SOURCE_NAME`` values users write."""

    #: the ``SOURCE_NAME`` values this source serves
    names: ClassVar[tuple[str, ...]]
    #: its settings model, when an entry point names the class (a ``register_source`` call names its own)
    settings_model: ClassVar[type[SourceSettings]] = SourceSettings
    #: the ``SOURCE_TYPE`` it goes with (``UNBOUNDED`` or ``BOUNDED``)
    source_type: ClassVar[str]
    #: whether ``dagger run --from/--to`` can replay it
    replayable: ClassVar[bool] = False
    #: whether its reader decodes only the fields the SQL names (:class:`SourceOptions` ``fields``); sources
    #: Spark prunes by itself (Parquet) leave this off
    decodes_named_fields: ClassVar[bool] = False
    #: whether Spark's own Kafka source can read it: real-time mode and ``SPARK_KAFKA_CONNECTOR``
    supports_real_time: ClassVar[bool] = False
    #: whether ``dagger test`` can feed a case's records to it (it reads records, not files)
    test_input: ClassVar[bool] = False
    #: the ``INPUT_DATATYPE`` values it reads (None: every registered one), and why, for the error
    formats: ClassVar[tuple[str, ...] | None] = None
    formats_rule: ClassVar[str] = ""

    def check(self, stream: StreamConfig) -> None:  # noqa: B027 - optional hook
        """Raise ``ValueError`` naming a key this stream lacks or sets wrongly (run while the config loads)."""

    def reach(self, stream: StreamConfig, config: JobConfig) -> None:  # noqa: B027 - optional hook
        """Before the query starts, while Spark's session does: wait up to ``SPARK_FIRST_CONTACT_TIMEOUT_MS`` for
        the stream's servers to answer for the first time, and raise :class:`~dagger.errors.SourceError` naming
        them and the cause when they do not (a job that cannot read ends in seconds)."""

    @abstractmethod
    def is_bounded(self, stream: StreamConfig, to_ms: int | None = None) -> bool:
        """Whether the stream ends (a bounded run reads it whole and exits); ``to_ms`` is ``dagger run --to``."""

    @abstractmethod
    def build(self, stream: StreamConfig, env: SourceEnv) -> DataFrame:
        """The stream's DataFrame: streaming, or a batch one when ``env.options.bounded``."""

    def check_reading(self, stream: StreamConfig, env: SourceEnv) -> None:  # noqa: B027 - optional hook
        """Raise the config errors :meth:`build` would raise before Spark reads (client settings, TLS stores,
        positions), without Spark: what ``dagger validate`` checks when it plans without Spark."""

    @abstractmethod
    def location(self, stream: StreamConfig) -> str:
        """Where the stream reads from, for ``dagger validate`` and logs."""

    def topics(self, stream: StreamConfig) -> str | None:
        """The topics the stream reads (a name or a pattern, as its keys give them), for Dagger's ``input_topic``
        telemetry tag and a registry subject's default name; None: it reads no topics."""
        return None

    def label(self, stream: StreamConfig) -> str:
        """The ``stream`` label of the stream's metrics (by default its table)."""
        return stream.INPUT_SCHEMA_TABLE

    @abstractmethod
    def input_description(
        self, spark: SparkSession, stream: StreamConfig, from_ms: int | None, to_ms: int | None
    ) -> dict[str, Any]:
        """What a bounded run of the stream reads (part of the run's fingerprint: same input, same batch id)."""

    def invalid_record_policy(self, stream: StreamConfig) -> str:
        """What the stream's reader does with a record it cannot decode: ``fail``, ``drop`` or ``dead-letter``."""
        return "fail"

    def passing_invalid_records(self, stream: StreamConfig) -> StreamConfig:
        """The stream as read when Dagger's ``InvalidRecordFilterTransformer`` follows it: records the reader cannot
        decode reach the transformer (marked invalid) instead of failing the job, unless the stream set a policy."""
        return stream

    def dead_letter_topic(self, stream: StreamConfig) -> str | None:
        """The stream's own dead-letter topic under the ``dead-letter`` policy (None: the job's output)."""
        return None

    def finish(self, progress: dict[str, Any], streams: list[StreamConfig], config: JobConfig) -> None:  # noqa: B027
        """Called once when a live run stopped cleanly, with the last query progress and this source's streams."""


#: the sources by ``SOURCE_NAME``; each registration's constructor returns the :class:`Source`
SOURCES: Registry[Callable[[], Source]] = Registry(
    kind="source",
    group="dagger.sources",
    settings_base=SourceSettings,
    contract=Source,
    key_prefixes=("SOURCE_",),
    reserved=COMMON_KEYS,
)
_instances: dict[str, Source] = {}


def register_source(
    name: str, settings: type[SourceSettings], build: Callable[[], Source], summary: str | None = None
) -> Plugin:
    """Register a source under ``name`` (a ``SOURCE_NAME``); ``build()`` returns the :class:`Source`."""
    _instances.pop(name, None)
    return SOURCES.register(name, settings, build, summary)


def source_named(name: str) -> Source:
    """The source registered under ``name`` (built once)."""
    if name not in _instances:
        plugin = SOURCES.get(name)
        if plugin is None:
            raise KeyError(name)
        _instances[name] = plugin.build()
    return _instances[name]


def source_of(stream: StreamConfig) -> Source:
    """The registered source of a stream (its ``SOURCE_NAME``)."""
    return source_named(stream.source_name)


def source_names() -> list[tuple[str, str]]:
    """Every accepted ``(SOURCE_NAME, SOURCE_TYPE)`` pair."""
    return sorted((name, source_named(name).source_type) for name in SOURCES.plugins())
