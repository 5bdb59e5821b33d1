"""What the runner's observers may read of a started job: its typed public surface.

The progress line (:mod:`dagger.progress`) and telemetry (:mod:`dagger.telemetry`) look at a job only through
:class:`JobView`; :class:`dagger.job.Job` is the one implementation. Every number they report of a micro-batch
comes from :class:`~dagger.telemetry.metrics.JobMetrics`, which records each batch once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dagger.config.model import JobConfig
    from dagger.job.context import JobCounters


class JobView(Protocol):
    """A job's counters and static facts, as its observers read them."""

    #: the bound job config
    config: JobConfig
    #: sinks, lookups, Longbow, UDFs, bounded inputs: every counter the job keeps
    counters: JobCounters

    def progress_view(self, progress: dict[str, Any]) -> dict[str, Any]:
        """A batch's progress with every Kafka source's offsets in our reader's form (``@table`` tagged)."""
        ...
