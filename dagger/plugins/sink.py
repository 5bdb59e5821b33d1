"""The sink contract and its registry: what a ``SINK_TYPE`` stands for, and how a sink registers.

A sink is one module and one registration::

    class WebhookSettings(SinkSettings):
        SINK_WEBHOOK_URL: str = Field(description="Where rows are POSTed.")

    class WebhookSink(Sink):
        name = "webhook"
        ...

    register_sink("webhook", WebhookSettings, WebhookSink.from_settings)

The settings model holds the sink's own ``SINK_<TYPE>_*`` keys (typed, with defaults and a description each: the
config reference is generated from it). A job's sink entry is validated against the model of its ``SINK_TYPE``
(:mod:`dagger.job.binding`): a key no sink knows is an error naming the closest one, a key of another sink
is accepted and ignored (as Dagger does when a job switches ``SINK_TYPE``). The constructor receives the
validated settings and what the job's sinks share (:class:`SinkEnv`) and returns a :class:`Sink`. Installed packages register through
the ``dagger.sinks`` entry-point group (:mod:`dagger.plugins.registry`).

Where each method runs: a sink is built on the driver from its validated settings (:meth:`Sink.from_settings`),
checked against the SQL output schema before anything runs (:meth:`Sink.check`), set up on the driver
(:meth:`Sink.prepare`), shipped to executors by pickling, and asked there for a :class:`SinkWriter` per Spark
task (:meth:`Sink.writer`). Writers receive Arrow record batches (no per-row Python objects on the hot path),
flush when the task's data is done and return a small picklable result; the driver then calls
:meth:`Sink.commit` once per micro-batch with every task's result and the batch id (the idempotency key). A sink
must never lose a failure: a write it cannot complete raises :class:`~dagger.errors.SinkError` and the
micro-batch fails. Rows a sink *rejects* go through :class:`dagger.sinks.rejected.RejectedRows`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from dagger.plugins.registry import Plugin, Registry

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from dagger.checkpoint import CheckpointStore
    from dagger.schema.descriptor_sets import DescriptorSet

#: the counters every sink has (kept by its writers, in tasks): rows written, rows sent to the dead-letter
#: output, rows the destination dropped by its own rules (InfluxDB's retention policy)
COUNTERS = ("written", "dead_letters", "dropped")
#: keys every sink entry has, whatever its type (:class:`dagger.config.model.SinkConfig`)
COMMON_KEYS = frozenset({"SINK_TYPE", "SINK_NAME", "SINK_ERROR_TYPES_FOR_FAILURE", "SINKS"})


class UntestableSinkError(ValueError):
    """A sink whose records ``dagger test`` cannot read back (not captured, or a type that cannot be)."""


class SinkSettings(BaseModel):
    """Base of a sink's settings model: its ``SINK_*`` keys, typed, each with a default and a description; and what
    the sink can do, declared here so that the config and the planner ask instead of testing ``SINK_TYPE``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Dagger writes this sink at each checkpoint (InfluxDB, BigQuery): a job whose sinks all do takes a config's
    #: ``FLINK_CHECKPOINT_INTERVAL_MS`` as its micro-batch interval, the same write cadence
    flushes_at_checkpoint: ClassVar[bool] = False
    #: keys of its own or of other sink types that this one does nothing with, each with why (``dagger validate``
    #: names those a config sets; listed in docs/config.md)
    ignored_keys: ClassVar[dict[str, str]] = {}
    #: Spark's own Kafka sink can write it: real-time mode and ``SPARK_KAFKA_CONNECTOR``
    supports_real_time: ClassVar[bool] = False

    def output_message(self) -> str | None:
        """The protobuf message this sink writes its rows as (lookups type their output by it, as Dagger does);
        None when it writes no protobuf."""
        return None

    def output_topic(self) -> str | None:
        """The topic it writes (Dagger's ``output_topic`` telemetry tag); None: it writes none."""
        return None

    def written_message(self) -> str | None:
        """The protobuf message its rows are written as or typed through (Dagger's ``output_proto`` telemetry tag);
        by default :meth:`output_message`."""
        return self.output_message()

    @property
    def large_messages(self) -> bool:
        """Whether this sink is set up for records of megabytes (the session then keeps Spark's byte cap on the
        Arrow batches sent to Python workers; see :mod:`dagger.session.tuning`)."""
        return False

    def registry_subjects(self) -> list[tuple[str, str]]:
        """The Confluent Schema Registry subjects this sink looks its schemas up in when the job starts (they are
        fetched with the streams' and pinned in the checkpoint), each with the key that names it."""
        return []

    def require(self, sink: str, *keys: str) -> None:
        """Raise the config error for the first of ``keys`` left empty (required by SINK_TYPE ``sink``)."""
        for key in keys:
            if getattr(self, key) in (None, ""):
                raise ValueError(f"{key} is required when SINK_TYPE is '{sink}'")


#: the names of columns the JVM computes for one sink (:meth:`Sink.jvm_columns`) begin so
JVM_COLUMN_PREFIX = "__dagger_sink_"


class SinkWriter(ABC):
    """Executor-side writer of one Spark task's share of a micro-batch."""

    @abstractmethod
    def write(self, batch: pa.RecordBatch) -> None:
        """Write (or buffer) one Arrow batch of SQL output rows."""

    @abstractmethod
    def flush(self) -> Any:
        """Finish the task's writes; raise SinkError on any failure; return a picklable result."""

    def abort(self) -> None:  # noqa: B027 - optional hook
        """Called instead of :meth:`flush` when the task failed (in this sink or another one): release clients
        and drop what is buffered, so nothing is delivered after the failure; the micro-batch is retried whole.
        Must not raise."""


class Sink(ABC):
    """Driver-side description of a sink; must be picklable (plain data only)."""

    #: the name users write in ``SINK_TYPE``
    name: ClassVar[str]
    #: its settings model, when an entry point names the class (a ``register_sink`` call names its own)
    settings_model: ClassVar[type[SinkSettings]] = SinkSettings
    #: what writing input that was already written does (a replay, a re-run bounded job); logged and documented
    rerun: ClassVar[str] = "writes it again"

    #: this sink's name in logs, counters and dead letters (``SINK_NAME``; given by :meth:`bind`)
    label: str = ""
    #: the job's dead-letter output (a :class:`~dagger.dead_letter.DeadLetterSpec`), or None (:meth:`bind`)
    dead_letter: Any = None
    #: error types that fail the batch instead of going to the dead-letter output (:meth:`bind`)
    fail_on: frozenset[str] = frozenset()
    #: kind → Spark accumulator (see :data:`COUNTERS`); given by :meth:`attach` before the query starts
    counters: dict[str, Any] | None = None
    #: a directory under the job's checkpoint this sink may keep state in, with the checkpoint's filesystem
    #: settings (a :class:`~dagger.checkpoint.CheckpointStore`; given by :meth:`attach`)
    state: CheckpointStore | None = None
    #: how long :meth:`reach` (and :meth:`prepare`) wait for a destination that has not answered yet
    #: (``SPARK_FIRST_CONTACT_TIMEOUT_MS``; given by the job)
    first_contact_s: float = 10.0
    #: ``dagger test``: the directory the sink's records are kept in instead of being sent (dagger.sinks.capture);
    #: None in every run of a job
    capture: str | None = None

    def bind(self, label: str, dead_letter: Any, fail_on: frozenset[str]) -> Sink:
        """What the job's config gives every sink besides its own settings: its ``SINK_NAME``, the job's
        dead-letter output and ``SINK_ERROR_TYPES_FOR_FAILURE`` (called once, when the job builds its sinks)."""
        self.label, self.dead_letter, self.fail_on = label, dead_letter, fail_on
        return self

    def attach(self, counters: dict[str, Any], state: CheckpointStore) -> None:
        """What a started job gives the sink: its counters and its state directory (before :meth:`prepare`)."""
        self.counters, self.state = counters, state

    def count(self, kind: str, n: int) -> None:
        """Add ``n`` to this sink's ``kind`` counter (a no-op outside a job)."""
        if n and self.counters and kind in self.counters:
            self.counters[kind].add(n)

    @property
    def display_name(self) -> str:
        return self.label or self.name

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Any, env: SinkEnv) -> Sink:
        """Build the sink from its validated settings (its registered :class:`SinkSettings` model) and what the
        job's sinks share (:class:`SinkEnv`: descriptor sets, the registry, the codec); raise
        :class:`~dagger.errors.DaggerConfigError` on a setting that cannot work (a message the descriptors lack)."""

    def check(self, schema: pa.Schema) -> list[str]:
        """Problems writing rows of ``schema`` to this sink (shown by ``dagger validate``)."""
        return []

    def describe(self) -> str:
        """One line for logs and ``dagger validate``."""
        return self.name

    def written_records(self, capture: str) -> list[dict[str, Any]]:
        """``dagger test``: the records this sink wrote in a case (kept in the directory ``capture`` instead of
        being sent: :mod:`dagger.sinks.capture`), read back as plain records (:mod:`dagger.sinks.readback`).
        Runs on the driver. A sink that cannot be read back leaves this out."""
        raise UntestableSinkError(
            f"sink {self.display_name}: dagger test cannot read back what a {self.name} sink writes (its plugin "
            "has no Sink.written_records); leave it out of the job's cases, or test the job without it"
        )

    def expected_record(self, record: dict[str, Any], partial: bool) -> dict[str, Any]:
        """A case's expected ``record`` in the form :meth:`written_records` gives (``partial``: the case compares
        only the fields it names)."""
        return record

    @abstractmethod
    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        """A writer for one task (called on executors)."""

    def reach(self) -> None:  # noqa: B027 - optional hook
        """Before the query starts, while Spark's session does: wait up to :attr:`first_contact_s` for the
        destination to answer for the first time, and raise :class:`~dagger.errors.SinkError` naming it and the
        cause when it does not (a job that cannot write ends in seconds)."""

    def jvm_columns(self, schema: StructType) -> dict[str, Any]:
        """Columns the JVM computes for this sink from the output columns (``schema``; name → Spark Column, named
        with :meth:`jvm_column`), handed to this sink's writer only: encodings Spark does faster than Python,
        such as Avro and protobuf. Runs on the driver while the query is planned."""
        return {}

    def jvm_column(self, what: str) -> str:
        """The name of this sink's JVM column ``what`` (unique per sink)."""
        return f"{JVM_COLUMN_PREFIX}{self.label or self.name}::{what}"  # '::': no sink's name is another's prefix

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Driver-side set-up before the query starts (e.g. create the destination table), after :meth:`reach`.
        Called for a captured sink too (``dagger test``, :attr:`capture` set), which must contact nothing: it sets
        up only what its writers need."""

    def commit(self, results: list[Any], batch_id: int) -> None:  # noqa: B027 - optional hook
        """Called on the driver after every task of micro-batch ``batch_id`` succeeded."""

    def abort(self, batch_id: int) -> None:  # noqa: B027 - optional hook
        """Called on the driver when micro-batch ``batch_id`` failed in some task; must not raise."""

    def explain_failure(self, message: str) -> str | None:
        """A query's failure (its most specific line, :func:`dagger.runner.root_message`) in this sink's words, when
        it is this sink's: e.g. a timeout of the client of Spark's own sink, which names no key of the job. None:
        not this sink's. Runs on the driver after the query failed."""
        return None

    def start_spark_query(
        self,
        df: Any,
        config: Any,
        checkpoint: str,
        name: str,
        trigger: dict[str, Any] | None = None,
        async_progress: bool = False,
        output_mode: str = "append",
    ) -> Any:
        """Start a streaming query writing ``df`` (the job's output) with Spark's own sink for this destination, its
        rows encoded in the JVM: real-time mode (``trigger`` None) and micro-batches on Spark's connector (Spark's
        ``trigger`` arguments, the plan's ``output_mode``). Only a sink whose settings declare ``supports_real_time`` has one; runs on the
        driver."""
        raise NotImplementedError(f"sink '{self.display_name}' has no Spark sink of its own")


@dataclass(frozen=True)
class SinkEnv:
    """What a sink is built with besides its own settings: what every sink of the job shares."""

    #: the descriptor sets and registry subjects the job read at start (None: a job without protobuf)
    descriptors: DescriptorSet | None = None
    #: the Schema Registry's client settings (a ``ConfluentSettings``' fields), where a sink writes Confluent's
    #: wire format
    registry: dict[str, Any] | None = None
    #: whether Dagger's protobuf encoder may run in the JVM (``SPARK_PROTOBUF_CODEC=jvm``; otherwise ptars in the
    #: Python writers)
    jvm_codecs: bool = True


#: the sinks by ``SINK_TYPE``
SINKS: Registry[Callable[[Any, SinkEnv], Sink]] = Registry(
    kind="sink",
    group="dagger.sinks",
    settings_base=SinkSettings,
    contract=Sink,
    build_of=lambda cls: cls.from_settings,
    key_prefixes=("SINK_",),
    reserved=COMMON_KEYS,
    name_pattern=r"[a-z][a-z0-9_-]*",
    name_rule="lower case letters, digits, '-' or '_'",
)


def register_sink(
    name: str,
    settings: type[SinkSettings],
    build: Callable[[Any, SinkEnv], Sink],
    summary: str | None = None,
) -> Plugin:
    """Register a sink under ``name`` (what users write in ``SINK_TYPE``); ``build(settings, env)`` returns the
    :class:`Sink` (``env``: a :class:`SinkEnv`). Registering a name again replaces it."""
    return SINKS.register(name, settings, build, summary)
