"""What a running job tells its operator: a progress line per reporting interval and a final summary.

Every line comes from Spark's query progress and the job's counters (sinks, lookups, DARTS): input rows and rate,
the watermark, invalid records dropped, rows dropped as late, what each sink wrote or dead-lettered. This is where
telemetry plugs in: the same numbers, exported instead of logged.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("dagger")


class ProgressReporter:
    """Progress lines of one job (``job`` is its :class:`~dagger.stream_manager.StreamManager`, for its counters).

    ``late_rows`` is the total of rows Spark's stateful operators dropped as late in the batches reported so far.
    """

    def __init__(self, job: Any):
        self.job = job
        self.late_rows = 0
        self._late_counted_to = -1

    def count_late_rows(self, query: Any) -> int:
        """Rows dropped as late in the batches not counted yet (``numRowsDroppedByWatermark``); adds them to
        :attr:`late_rows`."""
        new = 0
        for progress in list(getattr(query, "recentProgress", None) or []):
            batch = progress.get("batchId", -1)
            if batch > self._late_counted_to:
                new += sum(op.get("numRowsDroppedByWatermark", 0) for op in progress.get("stateOperators") or [])
                self._late_counted_to = batch
        self.late_rows += new
        return new

    def report(self, query: Any, final: bool = False) -> None:
        """Log the latest progress (``final``: the run's summary)."""
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
        from dagger.telemetry.metrics import invalid_counts, max_lag

        invalid = {table: count for table, (_, count) in invalid_counts(progress).items()}
        late = self.count_late_rows(query)

        lag = max_lag(progress)
        log.info(
            "%sbatch %s: %s input rows (%.0f rows/s)%s, watermark %s%s%s",
            "final " if final else "",
            progress.get("batchId"),
            progress.get("numInputRows"),
            progress.get("processedRowsPerSecond") or 0.0,
            f", consumer lag {lag}" if lag is not None else "",
            (progress.get("eventTime") or {}).get("watermark", "-"),
            f", invalid records dropped {invalid}" if any(invalid.values()) else "",
            f", late rows dropped {late} ({self.late_rows} since start)" if late or (final and self.late_rows) else "",
        )
        if final and self.late_rows:
            log.warning(
                "%d row(s) arrived after the watermark had closed their window and were dropped (counted by Spark "
                "after partial aggregation); raise FLINK_WATERMARK_DELAY_MS if records arrive this late",
                self.late_rows,
            )
        sinks = []
        for name, kinds in self.job.sink_counters.items():
            values = {k: a.value for k, a in kinds.items() if a.value}
            if values:
                sinks.append(f"{name} " + " ".join(f"{k}={v}" for k, v in values.items()))
        if sinks:
            log.info("sinks: %s", "; ".join(sinks))
        lookups = []
        for name, metrics in self.job.lookup_metrics.items():
            values = {k: v for k, v in metrics.values().items() if v}
            if values:
                lookups.append(f"{name} " + " ".join(f"{k}={v}" for k, v in values.items()))
        if lookups:
            log.info("lookups: %s", "; ".join(lookups))
        counters = {k: v.value for k, v in (self.job.udf_context.counters if self.job.udf_context else {}).items()}
        if any(counters.values()):
            log.info("DARTS: %s", ", ".join(f"{k}={v}" for k, v in counters.items()))
