"""The :class:`Job` facade: one job, from its bound config to a started query and back to a clean stop, in the
shape of Quix Streams' ``Application`` (a small typed surface).

``validate()`` plans everything short of starting (``dagger validate`` prints the :class:`~dagger.job.plan.Plan`),
``start()`` starts the query, ``stop()`` ends it after the running micro-batch. The runner (:mod:`dagger.runner`)
drives it; progress and telemetry read it as a :class:`~dagger.job.view.JobView` (``config``, ``counters``,
``progress_view``). Runs on the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagger.job.descriptors as descriptors
import dagger.job.plan as planning
import dagger.job.start as starting
from dagger.job.context import JobContext, JobCounters, RunOptions
from dagger.kafka.source.spark import tagged_progress
from dagger.plugins.source import source_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from dagger.bounded import BoundedRun
    from dagger.config.model import JobConfig, StreamConfig
    from dagger.job.fixtures import JobFixtures
    from dagger.job.plan import Plan
    from dagger.plugins.sink import Sink
    from dagger.plugins.source import Source
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger("dagger")


class Job:
    """Build, start and stop one job.

    Parameters
    ----------
    config:
        The bound job config (:func:`dagger.job.load_config`).
    checkpoint_dir:
        Overrides ``SPARK_CHECKPOINT_LOCATION``.
    available_now:
        Process what the sources hold now, emit every window the watermark closes, and stop.
    spark:
        An existing session (tests, embedding applications); by default one is created from the config.
    commit_offsets:
        Commit consumed offsets to each Kafka stream's consumer group (``dagger run --no-commit`` turns it off).
    from_ms, to_ms:
        ``dagger run --from`` / ``--to``: replay a time range.
    validating:
        Planned for ``dagger validate`` only: nothing is asked of the brokers.
    fixtures:
        ``dagger test``'s stand-ins for the sources, the sinks' destinations and the dead-letter output.
    """

    def __init__(
        self,
        config: JobConfig,
        checkpoint_dir: str | None = None,
        available_now: bool = False,
        spark: SparkSession | None = None,
        commit_offsets: bool = True,
        from_ms: int | None = None,
        to_ms: int | None = None,
        validating: bool = False,
        fixtures: JobFixtures | None = None,
    ):
        options = RunOptions(checkpoint_dir, available_now, commit_offsets, from_ms, to_ms, validating)
        self.context = JobContext(config, options, spark, fixtures)
        #: the plan the running query was started with (output mode, tables, sinks, rewrite notes)
        self.planned: Plan | None = None
        self.query: StreamingQuery | BoundedRun | None = None
        self._committed_batch = -1  # the last real-time batch whose offsets went to the consumer groups

    # -- what it is ----------------------------------------------------------------------------------------

    @property
    def config(self) -> JobConfig:
        return self.context.config

    @property
    def counters(self) -> JobCounters:
        return self.context.counters

    @property
    def options(self) -> RunOptions:
        return self.context.options

    @property
    def spark(self) -> SparkSession:
        return self.context.spark

    @property
    def bounded(self) -> bool:
        """Whether every stream ends (the job runs as one batch query)."""
        return self.context.bounded

    @property
    def real_time(self) -> bool:
        return self.context.real_time

    @property
    def checkpoint(self) -> str:
        return self.context.checkpoint

    @property
    def descriptors(self) -> DescriptorSet:
        """The descriptor sets the job runs with."""
        return descriptors.current(self.context)

    # -- building and starting ------------------------------------------------------------------------------

    def check(self) -> None:
        """Resolve every stream's records and every sink's messages against the descriptor sets, before Spark
        starts (config errors → exit 2)."""
        descriptors.check(self.context)
        planning.sinks(self.context)

    def reach(self) -> None:
        """Wait for every stream's servers and every sink's destination to answer once
        (:meth:`dagger.plugins.source.Source.reach`, :meth:`dagger.plugins.sink.Sink.reach`); raises the first
        :class:`~dagger.errors.SourceError` or :class:`~dagger.errors.SinkError`. The runner calls it while Spark's
        session starts."""

        for stream in self.config.STREAMS:
            source_of(stream).reach(stream, self.config)
        for sink in planning.sinks(self.context):  # built by check(), before the runner starts this thread
            sink.first_contact_s = self.config.SPARK_FIRST_CONTACT_TIMEOUT_MS / 1000
            sink.reach()
        self.context.sinks_reached = True  # the start does not ask them again

    def plan_without_spark(self) -> tuple[Plan | None, str]:
        """The plan when it can be read without Spark (:mod:`dagger.job.static_plan`), else ``(None, why not)``."""
        from dagger.job.static_plan import plan_without_spark  # cycle: dagger.job.static_plan import(s) this module

        return plan_without_spark(self.context)

    def validate(self) -> Plan:
        """Everything short of starting the query: streams, SQL, output schema, mode, sink checks."""
        return planning.plan(self.context)

    def start(self, plan: Plan | None = None) -> StreamingQuery | BoundedRun:
        """Start the query (planning it first unless ``plan`` is given) and return it."""
        plan = self.planned = plan or self.validate()
        self.query = starting.start(self.context, plan)
        return self.query

    def stop(self, at_once: Callable[[], bool] = lambda: False, timeout: float = 120.0) -> None:
        """Stop the running query after its running micro-batch (no new input is admitted meanwhile); ``at_once()``
        turning true, or ``timeout`` seconds, stop it without waiting. A bounded run is cancelled (a re-run redoes
        it); a real-time query stops at once (what it wrote since its last checkpoint is written again)."""
        query, config = self.query, self.config
        if query is None:
            return
        if self.bounded:
            log.info("cancelling the bounded run %r", config.FLINK_JOB_ID)
            query.stop()
            return
        if self.real_time:  # its batches run back to back for the checkpoint interval
            log.info(
                "stopping %r (real-time mode): what was written since the last checkpoint is written again by the "
                "next run",
                config.FLINK_JOB_ID,
            )
            # its long-running tasks are interrupted mid-write: Spark logs each abort as an ERROR with a stack trace
            # (InterruptException), the expected end of a real-time query and not the job's; the job ends here
            self.spark.sparkContext.setLogLevel("OFF")
            query.stop()
            return
        # no new input from here: with back-to-back micro-batches there is otherwise no moment between two of them
        hold = Path(self.context.hold_file)
        hold.touch()
        try:
            deadline = time.monotonic() + timeout
            while query.isActive and query.status.get("isTriggerActive") and not at_once():
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.005)  # planning an empty batch takes milliseconds: look often
            if at_once():
                log.info("stopping %r at once: the running micro-batch is redone by the next run", config.FLINK_JOB_ID)
            else:
                log.info("stopping %r after the last finished micro-batch", config.FLINK_JOB_ID)
            query.stop()
        finally:
            hold.unlink(missing_ok=True)

    # -- while it runs ---------------------------------------------------------------------------------------

    @property
    def refresh_seconds(self) -> float | None:
        """How often the running job fetches its descriptor sets again; None: never."""
        return descriptors.refresh_seconds(self.context)

    def fetch_descriptors(self) -> DescriptorSet | None:
        """The descriptor sets fetched again when they changed (None: unchanged, or not fetchable)."""
        return descriptors.fetch_fresh(self.context)

    def descriptor_changes(self, fresh: DescriptorSet) -> tuple[list[str], list[str]]:
        """``(problems, added)`` of switching the running query to ``fresh``."""
        return descriptors.changes(self.context, fresh, self.planned.rewritten_sql if self.planned else None)

    def adopt_descriptors(self, fresh: DescriptorSet) -> None:
        """Run with ``fresh`` from the next :meth:`validate` on."""
        self.context.descriptor_set = fresh
        self.planned = None

    def progress_view(self, progress: dict[str, Any]) -> dict[str, Any]:
        """JobView: ``progress`` with Spark's Kafka sources' offsets in our reader's form (real-time mode, Spark's
        connector)."""
        if not self.context.spark_kafka:
            return progress

        return tagged_progress(progress, self.config)

    def after_batches(self, query: StreamingQuery) -> None:
        """Called by the runner between its waits on a running query: a query on Spark's Kafka sink (real-time mode,
        ``SPARK_KAFKA_CONNECTOR=spark`` or ``jvm``) commits its last finished batch's end offsets to each stream's
        consumer group (Dagger's reader in Python workers commits its own as it plans the next micro-batch; Spark's
        asynchronous progress tracking, which those queries use, tells a source of its batches two late)."""
        progress = query.lastProgress if self.context.spark_kafka and self.options.commit_offsets else None
        if not progress or progress.get("batchId", -1) <= self._committed_batch:
            return
        self._finish_sources(progress)
        self._committed_batch = progress["batchId"]

    def finish(self, query: StreamingQuery | BoundedRun) -> None:
        """Once a live run stopped cleanly: let each source finish its streams (the Kafka source commits the last
        processed offsets to each stream's group). Bounded runs and replays leave the groups alone."""
        options = self.options
        if not options.commit_offsets or self.bounded or options.from_ms is not None or query.exception() is not None:
            return
        if self.context.spark_kafka:
            self.after_batches(query)
        else:
            self._finish_sources(query.lastProgress or {})

    def _finish_sources(self, progress: dict[str, Any]) -> None:
        """Hand ``progress`` (in our reader's form: :meth:`progress_view`) to each source with its streams."""
        by_source: dict[int, tuple[Source, list[StreamConfig]]] = {}
        for stream in self.config.STREAMS:
            source = self.context.source(stream)
            by_source.setdefault(id(source), (source, []))[1].append(stream)
        for source, streams in by_source.values():
            source.finish(self.progress_view(progress), streams, self.config)

    def explain_failure(self, message: str) -> str:
        """The query's failure (its most specific line) in the words of the sink it belongs to, where one claims
        it; else as it is."""
        for sink in self.sinks():
            explained = sink.explain_failure(message)
            if explained:
                return explained
        return message

    def sinks(self) -> list[Sink]:
        """The job's sinks (built once for the descriptor sets in use)."""
        return planning.sinks(self.context)
