"""Job telemetry: the job's metrics (:mod:`dagger.telemetry.metrics`), measured on the driver from query progress
events, accumulators and the runner, and exported to Prometheus (:mod:`dagger.telemetry.prometheus`) and
StatsD (:mod:`dagger.telemetry.statsd`).

:class:`Telemetry` is what the runner holds: made before planning (so ``dagger_up`` is scrapeable while the job
starts), attached to the query once it runs (a ``StreamingQueryListener`` records every micro-batch's progress
as it completes), told about a fatal error, and closed at the end, after ``METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS``
when the job failed, as Dagger waits so the last metrics leave.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from dagger.telemetry.metrics import METRICS, JobMetrics, Metric

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.job_view import JobView

log = logging.getLogger("dagger")


def _listener_class() -> type:
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):
        """Records each completed micro-batch of one query (by run id) into :class:`JobMetrics`."""

        def __init__(self, telemetry: Telemetry, run_id: str):
            self.telemetry, self.run_id = telemetry, run_id

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - PySpark's names
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            progress = event.progress
            if str(progress.runId) == self.run_id:
                try:
                    self.telemetry.record(json.loads(progress.json))
                except Exception:  # noqa: BLE001 - metrics must never disturb the query
                    log.warning("metrics: could not record batch %s", progress.batchId, exc_info=True)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    return ProgressListener


class Telemetry:
    """One job's metrics, the listener that records each micro-batch once, and the exporters (``job``: its
    :class:`~dagger.job_view.JobView`). Every job has one: the progress line reads its metrics; with
    ``METRIC_TELEMETRY_ENABLE=false`` nothing is exported."""

    def __init__(self, job: JobView):
        config = job.config
        self.job = job
        self.metrics = JobMetrics(job)
        self.shutdown_period_ms = 0
        self.endpoint = None
        self.statsd = None
        self._listener = None
        self._spark: SparkSession | None = None
        if not config.METRIC_TELEMETRY_ENABLE:
            return
        self.shutdown_period_ms = config.METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS
        job_id = config.FLINK_JOB_ID
        if config.METRIC_PROMETHEUS_PORT:
            from dagger.telemetry.prometheus import PrometheusEndpoint

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
            from dagger.telemetry.statsd import StatsdPusher, parse_tags

            self.statsd = StatsdPusher(
                self.metrics,
                job_id,
                config.METRIC_STATSD_HOST,
                config.METRIC_STATSD_PORT,
                parse_tags(config.METRIC_STATSD_TAGS),
            )
            log.info("metrics: StatsD to %s:%d", config.METRIC_STATSD_HOST, config.METRIC_STATSD_PORT)

    def attach(self, query: Any, spark: SparkSession) -> None:
        """Record ``query``'s progress from now on (a listener on its session ``spark``)."""
        self.metrics.record_start()
        if not hasattr(query, "runId"):
            return  # a bounded run: one batch, recorded when it ends
        if self._listener is not None and self._spark is not None:  # a restarted query: follow the new one
            self._spark.streams.removeListener(self._listener)
        self._listener = _listener_class()(self, str(query.runId))
        self._spark = spark
        spark.streams.addListener(self._listener)

    def record(self, progress: dict[str, Any] | None) -> None:
        """One micro-batch's progress (ignored when already recorded), then a StatsD push."""
        if progress and self.metrics.record_progress(progress) and self.statsd is not None:
            self.statsd.push()

    def fatal(self, exception_type: str) -> None:
        """The job failed with ``exception_type`` (counted, and pushed at once)."""
        self.metrics.record_exception(exception_type, fatal=True)
        if self.statsd is not None:
            self.statsd.push()

    def close(self, failed: bool = False) -> None:
        """Stop recording and exporting; after a failure first wait ``METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS`` so
        the last metrics are scraped (``dagger_up`` 0, the fatal exception counted)."""
        self.metrics.record_stop()
        if self._listener is not None and self._spark is not None:
            try:
                self._spark.streams.removeListener(self._listener)
            except Exception:  # noqa: BLE001 - the session may be gone
                pass
        if self.statsd is not None:
            self.statsd.push()
        if failed and self.shutdown_period_ms > 0 and (self.endpoint is not None or self.statsd is not None):
            log.info(
                "waiting %d ms so the last metrics leave (METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS)", self.shutdown_period_ms
            )
            time.sleep(self.shutdown_period_ms / 1000.0)
        if self.endpoint is not None:
            self.endpoint.close()
        if self.statsd is not None:
            self.statsd.close()


__all__ = ["METRICS", "JobMetrics", "Metric", "Telemetry"]
