"""The sink plugin contract.

A sink is registered with its settings model (:mod:`dagger.registry.sinks`), built on the driver from its
validated settings (:meth:`Sink.from_settings`), checked against the SQL
output schema before anything runs (:meth:`Sink.check`), shipped to executors by pickling, and asked there
for a :class:`SinkWriter` per Spark task. Writers receive Arrow record batches (no per-row Python objects
on the hot path), flush when the task's data is done and return a small picklable result; the driver then
calls :meth:`Sink.commit` once per micro-batch with every task's result and the batch id (the idempotency
key). A sink must never lose a failure: a write it cannot complete raises :class:`~dagger.errors.SinkError`
and the micro-batch fails.

Rows a sink *rejects* (a value its destination cannot take) are not write failures: the writer hands them to
:class:`RejectedRows`, which fails the batch when their error type is in ``SINK_ERROR_TYPES_FOR_FAILURE``
(or when the job has no dead-letter output) and otherwise writes them to the job's dead-letter output
(:mod:`dagger.dead_letter`), counted.

One Spark writer (:mod:`dagger.sinks.spark_writer`) drives every configured sink, so a job computes its SQL
once per micro-batch whatever the number of sinks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from dagger.errors import SinkError

if TYPE_CHECKING:
    from dagger.checkpoint import CheckpointStore
    from dagger.schema.registry import DescriptorSet

#: the counters every sink has (kept by its writers, in tasks): rows written, rows sent to the dead-letter
#: output, rows the destination dropped by its own rules (InfluxDB's retention policy)
COUNTERS = ("written", "dead_letters", "dropped")


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
    def from_settings(cls, settings: Any, descriptors: DescriptorSet | None) -> Sink:
        """Build the sink from its validated settings (its registered :class:`~dagger.registry.sinks.SinkSettings`
        model) and the job's descriptors; raise :class:`~dagger.errors.DaggerConfigError` on a setting that
        cannot work (a message the descriptors lack)."""

    def check(self, schema: pa.Schema) -> list[str]:
        """Problems writing rows of ``schema`` to this sink (shown by ``dagger validate``)."""
        return []

    def describe(self) -> str:
        """One line for logs and ``dagger validate``."""
        return self.name

    @abstractmethod
    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        """A writer for one task (called on executors)."""

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Driver-side set-up before the query starts (e.g. create the destination table)."""

    def commit(self, results: list[Any], batch_id: int) -> None:  # noqa: B027 - optional hook
        """Called on the driver after every task of micro-batch ``batch_id`` succeeded."""

    def abort(self, batch_id: int) -> None:  # noqa: B027 - optional hook
        """Called on the driver when micro-batch ``batch_id`` failed in some task; must not raise."""


class RejectedRows:
    """Rows one task of a sink rejected: failed on, or sent to the dead-letter output.

    Parameters
    ----------
    sink:
        The sink (its ``fail_on``, ``dead_letter`` and name decide what happens).
    batch_id, partition:
        The micro-batch and Spark partition, recorded as the dead letters' coordinates.
    """

    def __init__(self, sink: Sink, batch_id: int, partition: int):
        self.sink = sink
        self.batch_id = batch_id
        self.partition = partition
        self._writer: Any = None
        self.count = 0

    def add(self, rows: pa.RecordBatch | pa.Table, reasons: list[str], error_types: list[str]) -> None:
        """Handle rejected ``rows`` (one reason and error type per row)."""
        if not len(reasons):
            return
        name = self.sink.display_name
        for index, error_type in enumerate(error_types):
            if error_type in self.sink.fail_on or self.sink.dead_letter is None:
                from dagger.dead_letter import row_json

                row = row_json(rows.slice(index, 1).to_pylist()[0])
                hint = (
                    f"{error_type} is listed in SINK_ERROR_TYPES_FOR_FAILURE"
                    if error_type in self.sink.fail_on
                    else "set DEAD_LETTER_KAFKA_TOPIC (+ _BROKERS) or DEAD_LETTER_PATH to keep the job running and "
                    "collect rejected rows there"
                )
                raise SinkError(
                    f"sink '{name}' rejected a row of batch {self.batch_id} ({error_type}): {reasons[index]}; "
                    f"{hint}. Row: {row[:500]}"
                )
        if self._writer is None:
            self._writer = self.sink.dead_letter.writer("sink", name, self.batch_id, self.partition)
        self._writer.write_rows(rows.to_pylist(), reasons, error_types)
        self.count += len(reasons)

    def abort(self) -> None:
        """The task failed: drop the dead letters collected (the retried batch rejects the rows again)."""
        writer, self._writer, self.count = self._writer, None, 0
        close = getattr(writer, "close", None)
        if close is not None:
            close()

    def flush(self) -> int:
        """Make the dead letters durable; count them; return how many this task wrote."""
        if self._writer is not None:
            self._writer.flush()
        self.sink.count("dead_letters", self.count)
        written, self.count = self.count, 0
        return written


class RowsRefused(Exception):
    """Raised by a write attempt when its destination refused rows (all of them, or the ``rows`` indexes)."""

    def __init__(self, error_type: str, reason: str, rows: list[int] | None = None):
        super().__init__(reason)
        self.error_type = error_type
        self.reason = reason
        self.rows = rows


def isolate(batch: pa.RecordBatch, attempt: Any, rejected: RejectedRows) -> None:
    """Write ``batch`` with ``attempt``; when it is refused, find the refused rows and reject only them.

    ``attempt(part)`` must either write all of ``part`` or nothing (raising :class:`RowsRefused`). Rows the
    refusal names are rejected and the rest retried; otherwise the batch is halved until the refused rows
    are alone (k bad rows in n cost about k·log2(n) attempts). A ``SINK_5XX_ERROR`` refusal is about the
    server, not the rows: the whole part is rejected without splitting.
    """
    try:
        attempt(batch)
    except RowsRefused as refused:
        n = batch.num_rows
        if refused.rows:
            bad = pa.array(sorted(set(refused.rows)), pa.int64())
            keep = pc.invert(pc.is_in(pa.array(range(n), pa.int64()), value_set=bad))
            rejected.add(batch.take(bad), [refused.reason] * len(bad), [refused.error_type] * len(bad))
            if pc.any(keep).as_py():
                isolate(batch.filter(keep), attempt, rejected)
        elif n == 1 or refused.error_type == "SINK_5XX_ERROR":
            rejected.add(batch, [refused.reason] * n, [refused.error_type] * n)
        else:
            isolate(batch.slice(0, n // 2), attempt, rejected)
            isolate(batch.slice(n // 2), attempt, rejected)
