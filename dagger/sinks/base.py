"""The sink plugin contract.

A sink is built on the driver from the job config (:meth:`Sink.from_config`), checked against the SQL
output schema before anything runs (:meth:`Sink.check`), shipped to executors by pickling, and asked there
for a :class:`SinkWriter` per Spark task. Writers receive Arrow record batches (no per-row Python objects
on the hot path), flush when the task's data is done and return a small picklable result; the driver then
calls :meth:`Sink.commit` once per micro-batch with every task's result and the batch id (the idempotency
key). A sink must never lose a failure: a write it cannot complete raises :class:`~dagger.errors.SinkError`
and the micro-batch fails.

One Spark writer (:mod:`dagger.sinks.spark_writer`) drives every configured sink, so a job computes its SQL
once per micro-batch whatever the number of sinks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import pyarrow as pa


class SinkWriter(ABC):
    """Executor-side writer of one Spark task's share of a micro-batch."""

    @abstractmethod
    def write(self, batch: pa.RecordBatch) -> None:
        """Write (or buffer) one Arrow batch of SQL output rows."""

    @abstractmethod
    def flush(self) -> Any:
        """Finish the task's writes; raise SinkError on any failure; return a picklable result."""


class Sink(ABC):
    """Driver-side description of a sink; must be picklable (plain data only)."""

    #: the name users write in ``SINK_TYPE``
    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_config(cls, config: Any, descriptors: Any) -> Sink:
        """Build the sink from a :class:`~dagger.config.model.JobConfig` and the loaded descriptors."""

    def check(self, schema: pa.Schema) -> list[str]:
        """Problems writing rows of ``schema`` to this sink (shown by ``dagger validate``)."""
        return []

    def describe(self) -> str:
        """One line for logs and ``dagger validate``."""
        return self.name

    @abstractmethod
    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        """A writer for one task (called on executors)."""

    def commit(self, results: list[Any], batch_id: int) -> None:  # noqa: B027 - optional hook
        """Called on the driver after every task of micro-batch ``batch_id`` succeeded."""
