"""What a running job tells its operator: a progress line per reporting interval and a final summary.

The lines are a view of the job's metrics (:class:`~dagger.telemetry.metrics.JobMetrics`, which records each
micro-batch once, as the runner polls the query): input rows and rate of the last batch, consumer lag, the watermark,
invalid records and rows dropped as late since the last line, what each sink wrote or dead-lettered, the lookups'
outcomes and DARTS' counters. Telemetry exports the same numbers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagger.telemetry.metrics import JobMetrics

log = logging.getLogger("dagger")


class ProgressReporter:
    """Progress lines of one job, read from its ``metrics``."""

    def __init__(self, metrics: JobMetrics):
        self.metrics = metrics
        self._late_reported = 0
        self._invalid_reported: dict[str, int] = {}

    @property
    def late_rows(self) -> int:
        """Rows Spark's stateful operators dropped as late since the job started."""
        return self.metrics.late

    def report(self, query: Any, final: bool = False) -> None:
        """Log the job's progress since the last line (``final``: the run's summary)."""
        progress = query.lastProgress
        if not progress:
            if hasattr(query, "progress_line"):
                log.info("%s", query.progress_line())
            return
        if "rowsPerStream" in progress:
            log.info(
                "bounded run done in %.1f s: %s rows read (%s)",
                progress["durationSeconds"],
                progress["numInputRows"],
                ", ".join(f"{t} {n}" for t, n in progress["rowsPerStream"].items()),
            )
        view = self.metrics.snapshot()
        late = view.late - self._late_reported
        self._late_reported = view.late
        invalid = {t: n - self._invalid_reported.get(t, 0) for t, n in view.invalid_by_table.items()}
        self._invalid_reported = dict(view.invalid_by_table)
        log.info(
            "%sbatch %s: %s input rows (%.0f rows/s)%s, watermark %s%s%s",
            "final " if final else "",
            view.last_batch if view.last_batch >= 0 else progress.get("batchId"),
            view.last_input_rows if view.last_batch >= 0 else progress.get("numInputRows"),
            view.processed_rate,
            f", consumer lag {view.max_lag}" if view.max_lag is not None else "",
            view.watermark_text or (progress.get("eventTime") or {}).get("watermark", "-"),
            f", invalid records {invalid}" if any(invalid.values()) else "",
            f", late rows dropped {late} ({view.late} since start)" if late or (final and view.late) else "",
        )
        if final and view.late:
            log.warning(
                "%d row(s) arrived after the watermark had closed their window and were dropped (counted by Spark "
                "after partial aggregation); raise FLINK_WATERMARK_DELAY_MS if records arrive this late",
                view.late,
            )
        for label, counts in (("sinks", view.sinks), ("lookups", view.lookups)):
            parts = [
                f"{name} " + " ".join(f"{k}={v}" for k, v in values.items() if v)
                for name, values in counts.items()
                if any(values.values())
            ]
            if parts:
                log.info("%s: %s", label, "; ".join(parts))
        if any(view.darts.values()):
            log.info("DARTS: %s", ", ".join(f"{k}={v}" for k, v in view.darts.items()))
