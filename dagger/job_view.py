"""What the runner's observers may read of a started job: its typed public surface.

The progress line (:mod:`dagger.progress`) and telemetry (:mod:`dagger.telemetry`) look at a job only through
:class:`JobView`; :class:`~dagger.stream_manager.StreamManager` is the one implementation. Every number they
report of a micro-batch comes from :class:`~dagger.telemetry.metrics.JobMetrics`, which records each batch once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dagger.config.model import JobConfig


class JobView(Protocol):
    """A job's counters and static facts, as its observers read them."""

    #: the validated job config
    config: JobConfig
    #: sink display name → outcome (``written``, ``rejected``, ``dead_letters``, …) → Spark accumulator
    sink_counters: dict[str, dict[str, Any]]
    #: external source label (``HTTP.0``) → its metrics (calls, failures by kind, latency histogram)
    lookup_metrics: dict[str, Any]
    #: classic Longbow's counters (:class:`~dagger.longbow.classic.LongbowMetrics`), None without Longbow
    longbow_metrics: Any
    #: DARTS' counters and stores (None without DARTS functions)
    udf_context: Any
    #: the functions of the library the SQL uses
    functions_used: list[str]
    #: what each bounded stream reads (Parquet files, Kafka ranges), for a bounded run's metrics
    inputs: list[dict[str, Any]]
    #: sinks whose written rows Spark counts itself (the query progress's ``numOutputRows``): a real-time query's
    #: Kafka sink, which has no accumulators of ours
    progress_sinks: list[str]

    def progress_view(self, progress: dict[str, Any]) -> dict[str, Any]:
        """A batch's progress with every Kafka source's offsets in our reader's form (``@table`` tagged)."""
        ...
