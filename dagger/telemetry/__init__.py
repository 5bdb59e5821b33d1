"""Job telemetry: the job's metrics (:mod:`dagger.telemetry.metrics`), measured on the driver from query progress
events, accumulators and the runner, and exported to Prometheus (:mod:`dagger.telemetry.prometheus`) and
StatsD (:mod:`dagger.telemetry.statsd`).

:class:`Telemetry` is what the runner holds: made before planning (so ``dagger_up`` is scrapeable while the job
starts), attached to the query once it runs (the runner then hands it each finished micro-batch's progress,
polled between its waits on the query: :meth:`Telemetry.poll`), told about a fatal error, and closed at the end, after ``METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS``
when the job failed, as Dagger waits so the last metrics leave.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from dagger.telemetry.metrics import METRICS, JobMetrics, Metric

if TYPE_CHECKING:
    from dagger.job.view import JobView

log = logging.getLogger("dagger")


def finished_batches(query: Any, after: int) -> list[dict[str, Any]]:
    """The progress of every micro-batch ``query`` finished after batch ``after``, oldest first (Spark retains
    the last ``spark.sql.streaming.numRecentProgressUpdates``, 100).

    Two calls into the JVM per batch finished since ``after`` (its JSON text), two more to see that nothing
    else is new. A ``StreamingQueryListener`` in Python is called for each batch and converts its event field by
    field over py4j: dozens of round trips per batch, which kept the JVM thread serving them ~30 % busy on 2 cores.
    """
    jquery = query._jsq  # noqa: SLF001 - the JVM's query: its progress as JSON text, without PySpark's objects
    last = jquery.lastProgress()
    if last is None:
        return []
    progress = json.loads(last.json())
    if progress.get("batchId", -1) <= after:
        return []
    if progress["batchId"] == after + 1:
        return [progress]
    retained = jquery.recentProgress()
    found: list[dict[str, Any]] = []
    for index in range(len(retained) - 1, -1, -1):  # newest first, down to the last one already seen
        progress = json.loads(retained[index].json())
        if progress.get("batchId", -1) <= after:
            break
        found.append(progress)
    return found[::-1]


class Telemetry:
    """One job's metrics, which record each micro-batch once, and the exporters (``job``: its
    :class:`~dagger.job.view.JobView`). Every job has one: the progress line reads its metrics; with
    ``METRIC_TELEMETRY_ENABLE=false`` nothing is exported."""

    def __init__(self, job: JobView):
        config = job.config
        self.job = job
        self.metrics = JobMetrics(job)
        self.shutdown_period_ms = 0
        self.endpoint = None
        self.statsd = None
        if not config.METRIC_TELEMETRY_ENABLE:
            return
        self.shutdown_period_ms = config.METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS
        job_id = config.FLINK_JOB_ID
        if config.METRIC_PROMETHEUS_PORT:
            from dagger.telemetry.prometheus import (
                PrometheusEndpoint,  # cycle: dagger.telemetry.prometheus import(s) this module
            )

            try:
                self.endpoint = PrometheusEndpoint(self.metrics, job_id, config.METRIC_PROMETHEUS_PORT)
                log.info("metrics: http://0.0.0.0:%d/metrics (Prometheus)", self.endpoint.port)
            except OSError as exc:
                log.error(
                    "METRIC_PROMETHEUS_PORT %d: cannot serve metrics (%s); the job runs without its Prometheus "
                    "endpoint (choose a free port, or 0 for none)",
                    config.METRIC_PROMETHEUS_PORT,
                    exc.strerror or exc,
                )
        if config.METRIC_STATSD_HOST:
            from dagger.telemetry.statsd import (  # cycle: dagger.telemetry.statsd import(s) this module
                StatsdPusher,
                parse_tags,
            )

            self.statsd = StatsdPusher(
                self.metrics,
                job_id,
                config.METRIC_STATSD_HOST,
                config.METRIC_STATSD_PORT,
                parse_tags(config.METRIC_STATSD_TAGS),
            )
            log.info("metrics: StatsD to %s:%d", config.METRIC_STATSD_HOST, config.METRIC_STATSD_PORT)

    def attach(self) -> None:
        """The job's query runs: record its micro-batches from now on (:meth:`poll`)."""
        self.metrics.record_start()

    def poll(self, query: Any) -> None:
        """Record each micro-batch ``query`` finished since the last call once (a restarted query's batches go on
        from its checkpoint's), then push to StatsD. The runner calls this between its waits on the query, and
        once more after it stopped."""
        if not hasattr(query, "runId"):
            return  # a bounded run: one batch, recorded when it ends
        recorded = [self.metrics.record_progress(p) for p in finished_batches(query, self.metrics.last_batch)]
        if any(recorded) and self.statsd is not None:
            self.statsd.push()

    def fatal(self, exception_type: str) -> None:
        """The job failed with ``exception_type`` (counted, and pushed at once)."""
        self.metrics.record_exception(exception_type, fatal=True)
        if self.statsd is not None:
            self.statsd.push()

    def close(self, failed: bool = False) -> None:
        """Stop recording and exporting; after a failure of a job that finished micro-batches, first wait
        ``METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS`` so the last metrics are scraped (``dagger_up`` 0, the fatal exception
        counted). A job that failed before its first micro-batch ended exits at once."""
        self.metrics.record_stop()
        if self.statsd is not None:
            self.statsd.push()
        exported = self.endpoint is not None or self.statsd is not None
        # a job that never finished a micro-batch has no last metrics to wait for: it fails at once
        if failed and self.shutdown_period_ms > 0 and exported and self.metrics.batches > 0:
            log.info(
                "waiting %d ms so the last metrics leave (METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS)", self.shutdown_period_ms
            )
            time.sleep(self.shutdown_period_ms / 1000.0)
        if self.endpoint is not None:
            self.endpoint.close()
        if self.statsd is not None:
            self.statsd.close()


__all__ = ["METRICS", "JobMetrics", "Metric", "Telemetry"]
