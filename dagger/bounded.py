"""Bounded runs: a job whose every stream has an end (Parquet history, a Kafka replay) runs as one Spark
batch query.

Why a batch query and not a stream that stops: Spark's event-time windows close only when a later
record moves the watermark past them, so a stream that simply stops at the end of its input never emits its
last windows. A batch query over the same rows computes every window that has data, with no late drops and
no need to raise ``FLINK_WATERMARK_DELAY_MS`` to the partition size (a Dagger backfill pitfall). The SQL,
the functions and the sinks are the same; the sinks see one micro-batch.

**Batch id.** A bounded run writes batch ``N`` of its checkpoint directory, where ``N`` is remembered per
input (the Parquet file list, or the Kafka streams and their positions): running the same input again
reuses its id, so sinks that are idempotent per batch (BigQuery) do not write it twice, while new input
gets a new id. See docs/sinks.md for what each sink does on a re-run.

:class:`BoundedRun` offers the calls of a ``StreamingQuery`` that the job, the runner and the tests use
(``isActive``, ``awaitTermination``, ``exception``, ``lastProgress``, ``status``, ``stop``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dagger.checkpoint import CheckpointStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RUNS = "bounded/runs.json"


def batch_id_for(store: CheckpointStore, fingerprint: str) -> int:
    """The batch id of a bounded input: the one it had before, else one more than the last."""
    runs = _load_runs(store)
    if fingerprint in runs:
        return runs[fingerprint]
    return max(runs.values(), default=-1) + 1


def record_run(store: CheckpointStore, fingerprint: str, batch_id: int) -> None:
    """Remember a finished bounded run's input → batch id (under the checkpoint, local or remote)."""
    runs = _load_runs(store)
    runs[fingerprint] = batch_id
    store.write_json(RUNS, runs)


def fingerprint(parts: list[Any]) -> str:
    """A stable digest of what a bounded run reads."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _load_runs(store: CheckpointStore) -> dict[str, int]:
    return {k: int(v) for k, v in (store.read_json(RUNS) or {}).items()}


class BoundedRunError(Exception):
    """A bounded run failed in Spark; the message holds the JVM exception and its causes."""


def _describe(exc: Any) -> str:
    """A py4j error's Java exception chain as text (its ``str`` is only "An error occurred while calling")."""
    lines, java, seen = [], exc.java_exception, 0
    while java is not None and seen < 10:
        lines.append(str(java.toString()))
        java, seen = java.getCause(), seen + 1
    return "\n".join(lines)


class BoundedRun:
    """One batch query run in a background thread, cancellable, with Spark's job progress as status."""

    def __init__(self, spark: SparkSession, name: str, batch_id: int, work: Callable[[], dict[str, Any]]):
        self.spark = spark
        self.name = name
        self.batch_id = batch_id
        self.group = f"dagger-{name}-{uuid.uuid4().hex[:8]}"
        self._work = work
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._result: dict[str, Any] = {}
        self._started = time.monotonic()
        self._elapsed: float | None = None
        self._thread = threading.Thread(target=self._main, name=f"bounded-{name}", daemon=True)

    def start(self) -> BoundedRun:
        self._thread.start()
        return self

    def _main(self) -> None:
        # a new thread has no active session on the JVM side, and Python data sources are looked up there
        jvm = self.spark._jvm
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(self.spark._jsparkSession)
        self.spark.sparkContext.setJobGroup(self.group, f"dagger bounded run {self.name}", True)
        # what a micro-batch's tasks read their batch id from (source dead letters, sink writers)
        self.spark.sparkContext.setLocalProperty("streaming.sql.batchId", str(self.batch_id))
        try:
            self._result = self._work() or {}
        except BaseException as exc:  # noqa: BLE001 - reported through exception()
            self._error = BoundedRunError(_describe(exc)) if hasattr(exc, "java_exception") else exc
        finally:
            self._elapsed = time.monotonic() - self._started
            self._done.set()

    # -- the StreamingQuery calls the manager uses ----------------------------------------------------------

    @property
    def isActive(self) -> bool:  # noqa: N802 - StreamingQuery's name
        return not self._done.is_set()

    def awaitTermination(self, timeout: float | None = None) -> bool:  # noqa: N802
        return self._done.wait(timeout)

    def exception(self) -> BaseException | None:
        return self._error

    @property
    def status(self) -> dict[str, Any]:
        return {"isTriggerActive": self.isActive, "message": "running" if self.isActive else "finished"}

    @property
    def lastProgress(self) -> dict[str, Any] | None:  # noqa: N802
        if self.isActive:
            return None
        rows = self._result.get("rows", {})
        elapsed = self._elapsed or 0.0
        total = sum(rows.values())
        return {
            "batchId": self.batch_id,
            "numInputRows": total,
            "processedRowsPerSecond": total / elapsed if elapsed else 0.0,
            "observedMetrics": self._result.get("observed", {}),
            "rowsPerStream": rows,
            "durationSeconds": elapsed,
            "sources": [],
        }

    def stop(self) -> None:
        self.spark.sparkContext.cancelJobGroup(self.group)
        self._done.wait(60)

    def progress_line(self) -> str:
        """Tasks done of the running Spark stages, for the status log."""
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            if job is None or job.status != "RUNNING":
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        elapsed = time.monotonic() - self._started
        return f"bounded run {self.name} (batch {self.batch_id}): {done}/{total} tasks of the running stages, {elapsed:.0f} s"
