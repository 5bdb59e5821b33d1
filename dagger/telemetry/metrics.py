"""Every metric a job exports: its Prometheus name, kind, labels, meaning and the Dagger metric it replaces.

The numbers are measured where they happen and gathered on the driver, because Spark runs the source's driver
side, the sink's commit and the executors in separate Python processes: query progress events (input rows and
offsets per stream, the watermark, late rows, state, observed invalid-record counts), Spark accumulators (sink
outcomes, lookups, DARTS) and the runner (up, restarts, exceptions). :class:`JobMetrics` holds them and
:meth:`JobMetrics.collect` renders them for Prometheus; ``docs/metrics.md`` is generated from :data:`METRICS`.

One module (~610 lines): two thirds of it is :data:`METRICS`, the declared table every metric is documented
and rendered from; :class:`JobMetrics` records each batch into it once.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dagger.plugins.format import format_of
from dagger.plugins.source import source_of

if TYPE_CHECKING:
    from dagger.config.model import JobConfig
    from dagger.job.view import JobView


@dataclass(frozen=True)
class Metric:
    """One exported metric: its full Prometheus name, kind, label names, meaning, and the Dagger metric it replaces."""

    name: str
    kind: str  # counter | gauge | histogram | info
    labels: tuple[str, ...]
    help: str
    dagger: str = ""  # the Raystack Dagger (Flink/StatsD) metric it replaces


METRICS: tuple[Metric, ...] = (
    Metric("dagger_up", "gauge", (), "1 while the job's query runs, 0 once it stopped or failed.", "Flink job status"),
    Metric("dagger_uptime_seconds", "gauge", (), "Seconds since the job's query started.", "uptime"),
    Metric(
        "dagger_query_restarts_total",
        "counter",
        (),
        "Times the query started from an existing checkpoint (a restart or a redeploy).",
        "numRestarts / fullRestarts",
    ),
    Metric(
        "dagger_fatal_exceptions_total",
        "counter",
        ("exception_type",),
        "Errors that stopped the job.",
        "fatal.exception{fatal_exception_type}",
    ),
    Metric(
        "dagger_non_fatal_exceptions_total",
        "counter",
        ("exception_type",),
        "Errors the job survived (failed lookups passed on, rows sent to the dead-letter output).",
        "non.fatal.exception{non_fatal_exception_type}",
    ),
    Metric(
        "dagger_source_records_total",
        "counter",
        ("table", "stream"),
        "Records read from each stream (every record, valid or not); `stream` is the stream's `SOURCE_KAFKA_NAME` "
        "(Dagger's telemetry tag), else its table.",
        "numRecordsIn",
    ),
    Metric(
        "dagger_input_rows_per_second",
        "gauge",
        (),
        "Rows arriving per second in the last micro-batch (Spark's inputRowsPerSecond).",
        "numRecordsInPerSecond",
    ),
    Metric(
        "dagger_processed_rows_per_second",
        "gauge",
        (),
        "Rows processed per second in the last micro-batch (Spark's processedRowsPerSecond).",
        "numRecordsOutPerSecond",
    ),
    Metric(
        "dagger_kafka_consumer_lag",
        "gauge",
        ("table", "stream", "topic", "partition"),
        "Records in the partition not yet processed: its latest offset minus the last processed end offset.",
        "records-lag (per partition)",
    ),
    Metric(
        "dagger_kafka_consumer_lag_max",
        "gauge",
        (),
        "The largest consumer lag of any partition of any stream.",
        "records-lag-max",
    ),
    Metric(
        "dagger_event_time_watermark_seconds",
        "gauge",
        (),
        "The query's event-time watermark (Unix seconds); rows older than it are late.",
        "currentInputWatermark",
    ),
    Metric(
        "dagger_late_records_dropped_total",
        "counter",
        (),
        "Rows stateful operators dropped because they arrived after the watermark (after partial aggregation).",
        "numLateRecordsDropped / late.records.dropped",
    ),
    Metric(
        "dagger_invalid_records_total",
        "counter",
        ("table", "policy"),
        "Undecodable records of each stream under the drop or dead-letter policy.",
        "filtered_invalid_records",
    ),
    Metric(
        "dagger_sink_records_total",
        "counter",
        ("sink", "outcome"),
        "Rows each sink handled: written, dead_letter (rejected, sent to the dead-letter output) or dropped.",
        "numRecordsOut / sink metrics",
    ),
    Metric(
        "dagger_dead_letter_records_total",
        "counter",
        ("origin",),
        "Records written to the dead-letter output, by origin: `sink:<name>` (rejected rows) or `stream:<table>` "
        "(undecodable records under the dead-letter policy).",
        "",
    ),
    Metric(
        "dagger_external_calls_total",
        "counter",
        ("source", "outcome"),
        "Calls of each external lookup (HTTP.0, PG.0 ...) by outcome: success, 404, 4xx, 5xx, timeout, "
        "empty_input (no call made), other, invalid_configuration, invalid_response (a body that is not JSON or lacks a mapped path, passed on with fail_on_errors false).",
        "total_external_calls, success_response, failures_code404|4XX|5XX, timeouts, empty_input, ...",
    ),
    Metric(
        "dagger_external_response_seconds",
        "histogram",
        ("source",),
        "Response time of each external lookup's calls.",
        "success_response_time / failure_response_time",
    ),
    Metric("dagger_external_cache_hits_total", "counter", ("source",), "Lookups answered from the answer cache.", ""),
    Metric("dagger_external_retries_total", "counter", ("source",), "Retried lookup calls.", ""),
    Metric(
        "dagger_longbow_rows_total",
        "counter",
        ("role", "outcome"),
        "Longbow's rows by role (writer, reader) and outcome: written or read (success), failed and passed on "
        "(failed), read without the row's own document (missing_last_record), passed on without a key or rowtime "
        "(no_key).",
        "longbow.writer / longbow.reader: success_on_write_document, failed_on_write_document, "
        "success_on_read_document, failed_on_read_document, failed_to_read_last_record",
    ),
    Metric(
        "dagger_longbow_documents_read_total",
        "counter",
        (),
        "Documents (stored rows) Longbow's reads returned, over all rows: divided by the reads, the documents per scan.",
        "longbow.reader: documents_read_per_scan",
    ),
    Metric(
        "dagger_longbow_response_seconds",
        "histogram",
        ("role", "outcome"),
        "Response time of Longbow's Bigtable calls by role (writer: a batch's MutateRows; reader: a ReadRows of up "
        "to 1,000 rows' ranges) and outcome (success, failed).",
        "longbow.writer / longbow.reader: success_on_write_document_response_time, "
        "failed_on_write_document_response_time, success_on_read_document_response_time, "
        "failed_on_read_document_response_time",
    ),
    Metric(
        "dagger_batch_duration_seconds",
        "histogram",
        (),
        "Wall time of each micro-batch (read, process, write, commit).",
        "checkpoint duration",
    ),
    Metric("dagger_batches_total", "counter", (), "Micro-batches completed.", ""),
    Metric(
        "dagger_batch_phase_seconds_total",
        "counter",
        ("phase",),
        "Time the micro-batches spent in each of Spark's phases (its progress's durationMs: latestOffset asks the"
        " sources for their ends, addBatch reads, processes and writes, commitOffsets/walCommit write the"
        " checkpoint); rate() shows where a slow job's time goes.",
        "",
    ),
    Metric("dagger_state_rows", "gauge", (), "Rows held in the query's state (windows, joins, dedup).", "state size"),
    Metric("dagger_state_memory_bytes", "gauge", (), "Memory the query's state stores use.", "state size"),
    Metric(
        "dagger_job_info",
        "info",
        ("sink_type", "input_topics", "input_protos", "output_topic", "output_proto"),
        "The job's shape, as labels (value 1).",
        "telemetry gauges sink_type, input_topic, input_proto, output_topic, output_proto",
    ),
    Metric("dagger_udf_info", "info", ("udf",), "Each function the job's SQL uses (value 1).", "udf/<Name>"),
    Metric(
        "dagger_processor_info",
        "info",
        ("stage", "type"),
        "Each pre- and post-processor of the job (value 1).",
        "pre_processor_type, post_processor_type",
    ),
    Metric(
        "dagger_darts_total",
        "counter",
        ("event",),
        "DARTS reference data: hit and miss of the per-worker cache, fetch of a file.",
        "DARTS dart_cache_hit / dart_cache_miss",
    ),
    Metric("dagger_parquet_files_read_total", "counter", ("table",), "Parquet files a bounded run read.", ""),
    Metric("dagger_parquet_rows_read_total", "counter", ("table",), "Rows a bounded run read from Parquet.", ""),
)
BY_NAME = {m.name: m for m in METRICS}
#: upper bounds (s) of the batch duration histogram
BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: the lookups' per-call counters (dagger.processors.external.base.METRICS) as outcomes
LOOKUP_OUTCOMES = {
    "success": "success",
    "failures_code404": "404",
    "failures_code4XX": "4xx",
    "failures_code5XX": "5xx",
    "timeouts": "timeout",
    "empty_input": "empty_input",
    "failures_other": "other",
    "invalid_configuration": "invalid_configuration",
    "invalid_response": "invalid_response",
}
SINK_OUTCOMES = {"written": "written", "dead_letters": "dead_letter", "dropped": "dropped"}
#: Longbow's counters (dagger.longbow.classic.COUNTERS) as (role, outcome)
LONGBOW_OUTCOMES = {
    "success_on_write_document": ("writer", "success"),
    "failed_on_write_document": ("writer", "failed"),
    "rows_without_key": ("writer", "no_key"),
    "success_on_read_document": ("reader", "success"),
    "failed_on_read_document": ("reader", "failed"),
    "failed_to_read_last_record": ("reader", "missing_last_record"),
}


def _seconds(iso: str | None) -> float | None:
    if not iso:
        return None

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _offsets(value: Any) -> dict[str, Any]:
    """A source's offsets, a dict or (in listener events) its JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


@dataclass
class MetricsView:
    """A job's numbers at one moment, as the progress line shows them."""

    last_batch: int
    last_input_rows: int
    processed_rate: float
    max_lag: int | None
    watermark_text: str | None
    late: int
    invalid_by_table: dict[str, int]
    sinks: dict[str, dict[str, int]] = field(default_factory=dict)
    lookups: dict[str, dict[str, int]] = field(default_factory=dict)
    darts: dict[str, int] = field(default_factory=dict)


@dataclass
class JobMetrics:
    """The job's numbers, updated from query progress and the runner, read by the exporters (thread-safe).

    ``job`` (its :class:`~dagger.job.view.JobView`) gives the accumulator-backed counters (sinks, lookups, DARTS)
    and the static facts (streams, sinks, functions, processors). Each micro-batch is recorded once
    (:meth:`record_progress`); the progress line reads :meth:`snapshot`.
    """

    job: JobView
    started: float = field(default_factory=time.time)
    up: int = 0
    restarts: int = 0
    last_batch: int = -1
    batches: int = 0
    source_records: dict[str, int] = field(default_factory=dict)
    invalid: dict[tuple[str, str], int] = field(default_factory=dict)
    lag: dict[tuple[str, str, str], int] = field(default_factory=dict)
    late: int = 0
    watermark: float | None = None
    watermark_text: str | None = None
    last_input_rows: int = 0
    input_rate: float = 0.0
    processed_rate: float = 0.0
    state_rows: int = 0
    state_bytes: int = 0
    batch_buckets: list[int] = field(default_factory=lambda: [0] * (len(BATCH_BUCKETS) + 1))
    batch_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    parquet_files: dict[str, int] = field(default_factory=dict)
    parquet_rows: dict[str, int] = field(default_factory=dict)
    output_rows: int = 0  # the query's own count of rows written (``sink.numOutputRows``), for progress_sinks
    fatal: dict[str, int] = field(default_factory=dict)
    non_fatal: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stream_tags: dict[str, str] | None = field(default=None, repr=False)  # table -> its stream label, once

    def stream_tag(self, table: str) -> str:
        """The ``stream`` label of a table's metrics: its ``SOURCE_KAFKA_NAME`` (Dagger's tag), else the table."""
        if self._stream_tags is None:
            self._stream_tags = {s.INPUT_SCHEMA_TABLE: source_of(s).label(s) for s in self.job.config.STREAMS}
        return self._stream_tags.get(table, table)

    # -- updates ------------------------------------------------------------------------------------------------

    def record_progress(self, progress: dict[str, Any]) -> bool:
        """Add one micro-batch's progress (a dict as ``query.lastProgress``); a batch id already counted (Spark
        reports a batch once per run; a listener and a poll may both hand it over) is ignored. Returns whether it
        counted."""
        batch = progress.get("batchId", -1)
        progress = self.job.progress_view(progress)
        with self._lock:
            if batch <= self.last_batch:
                return False
            self.output_rows += max(int((progress.get("sink") or {}).get("numOutputRows") or 0), 0)
            if self.last_batch < 0 and batch > 0:
                self.restarts += 1  # the first batch of this run continues a checkpoint
            self.last_batch = batch
            self.last_input_rows = int(progress.get("numInputRows") or 0)
            self.input_rate = float(progress.get("inputRowsPerSecond") or 0.0)
            self.processed_rate = float(progress.get("processedRowsPerSecond") or 0.0)
            text = (progress.get("eventTime") or {}).get("watermark")
            watermark = _seconds(text)
            if watermark is not None and watermark > 0:
                self.watermark, self.watermark_text = watermark, text
            operators = progress.get("stateOperators") or []
            self.late += sum(op.get("numRowsDroppedByWatermark", 0) for op in operators)
            self.state_rows = sum(op.get("numRowsTotal", 0) for op in operators)
            self.state_bytes = sum(op.get("memoryUsedBytes", 0) for op in operators)
            self._observe_batch((progress.get("batchDuration") or 0) / 1000.0)
            for phase, ms in (progress.get("durationMs") or {}).items():
                self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + (ms or 0) / 1000.0
            for source in progress.get("sources") or []:
                self._record_source(source)
            self._record_invalid(progress)
        return True

    def _observe_batch(self, seconds: float) -> None:
        self.batches += 1
        self.batch_buckets[bisect.bisect_left(BATCH_BUCKETS, seconds)] += 1
        self.batch_seconds += seconds

    def _record_invalid(self, progress: dict[str, Any]) -> None:
        for table, (filtered, count) in invalid_counts(progress).items():
            # the InvalidRecordFilterTransformer drops what it filters, whatever the stream's policy says
            key = (table, "drop" if filtered else self._policy(table))
            self.invalid[key] = self.invalid.get(key, 0) + count

    def record_bounded(self, progress: dict[str, Any], inputs: list[dict[str, Any]]) -> None:
        """A bounded run's one batch (rows per stream, observed invalid records) and the Parquet files it read."""
        with self._lock:
            self._observe_batch(float(progress.get("durationSeconds") or 0.0))
            self.processed_rate = float(progress.get("processedRowsPerSecond") or 0.0)
            for table, rows in (progress.get("rowsPerStream") or {}).items():
                self.source_records[table] = self.source_records.get(table, 0) + int(rows)
            for entry in inputs:
                if "files" in entry:
                    table = entry["table"]
                    self.parquet_files[table] = self.parquet_files.get(table, 0) + len(entry["files"])
                    self.parquet_rows[table] = self.parquet_rows.get(table, 0) + int(
                        (progress.get("rowsPerStream") or {}).get(table, 0)
                    )
            self._record_invalid(progress)

    def _record_source(self, source: dict[str, Any]) -> None:
        table, lags = partition_lag(source)
        self.source_records[table] = self.source_records.get(table, 0) + int(source.get("numInputRows") or 0)
        for (topic, partition), lag in lags.items():
            self.lag[(table, topic, partition)] = lag

    def _policy(self, table: str) -> str:
        for stream in self.job.config.STREAMS:
            if stream.INPUT_SCHEMA_TABLE == table:
                return source_of(stream).invalid_record_policy(stream)
        return "drop"

    def record_start(self) -> None:
        with self._lock:
            self.up = 1
            self.started = time.time()

    def record_stop(self) -> None:
        with self._lock:
            self.up = 0

    def record_exception(self, exc: BaseException | str, fatal: bool) -> None:
        kind = exc if isinstance(exc, str) else type(exc).__name__
        with self._lock:
            target = self.fatal if fatal else self.non_fatal
            target[kind] = target.get(kind, 0) + 1

    # -- reading ------------------------------------------------------------------------------------------------

    def snapshot(self) -> MetricsView:
        """The numbers the progress line shows, read at once."""
        job = self.job
        with self._lock:
            invalid: dict[str, int] = {}
            for (table, _policy), n in self.invalid.items():
                invalid[table] = invalid.get(table, 0) + n
            view = MetricsView(
                last_batch=self.last_batch,
                last_input_rows=self.last_input_rows,
                processed_rate=self.processed_rate,
                max_lag=max(self.lag.values()) if self.lag else None,
                watermark_text=self.watermark_text,
                late=self.late,
                invalid_by_table=invalid,
            )
        view.sinks = {name: {k: a.value for k, a in kinds.items()} for name, kinds in job.counters.sinks.items()}
        for name in job.counters.progress_sinks:  # Spark's sink wrote them: its own count
            view.sinks.setdefault(name, {})["written"] = self.output_rows
        view.lookups = {name: metrics.values() for name, metrics in job.counters.lookups.items()}
        context = job.counters.udf_context
        view.darts = {k: a.value for k, a in ((context.counters if context else None) or {}).items()}
        return view

    def values(self) -> Iterator[tuple[Metric, dict[str, str], Any]]:
        """Every sample: ``(metric, labels, value)``; a histogram's value is ``(cumulative buckets, sum)``."""
        with self._lock:
            yield BY_NAME["dagger_up"], {}, self.up
            yield BY_NAME["dagger_uptime_seconds"], {}, time.time() - self.started if self.up else 0.0
            yield BY_NAME["dagger_query_restarts_total"], {}, self.restarts
            for kind, n in sorted(self.fatal.items()):
                yield BY_NAME["dagger_fatal_exceptions_total"], {"exception_type": kind}, n
            for kind, n in sorted(self.non_fatal.items()):
                yield BY_NAME["dagger_non_fatal_exceptions_total"], {"exception_type": kind}, n
            for table, n in sorted(self.source_records.items()):
                yield BY_NAME["dagger_source_records_total"], {"table": table, "stream": self.stream_tag(table)}, n
            yield BY_NAME["dagger_input_rows_per_second"], {}, self.input_rate
            yield BY_NAME["dagger_processed_rows_per_second"], {}, self.processed_rate
            for (table, topic, partition), n in sorted(self.lag.items()):
                labels = {"table": table, "stream": self.stream_tag(table), "topic": topic, "partition": partition}
                yield BY_NAME["dagger_kafka_consumer_lag"], labels, n
            yield BY_NAME["dagger_kafka_consumer_lag_max"], {}, max(self.lag.values(), default=0)
            if self.watermark is not None:
                yield BY_NAME["dagger_event_time_watermark_seconds"], {}, self.watermark
            yield BY_NAME["dagger_late_records_dropped_total"], {}, self.late
            for (table, policy), n in sorted(self.invalid.items()):
                yield BY_NAME["dagger_invalid_records_total"], {"table": table, "policy": policy}, n
            for (table, policy), n in sorted(self.invalid.items()):
                if policy == "dead-letter":
                    yield BY_NAME["dagger_dead_letter_records_total"], {"origin": f"stream:{table}"}, n
            if self.invalid:  # Dagger counts a record it could not read as a non-fatal exception
                invalid = sum(self.invalid.values())
                yield BY_NAME["dagger_non_fatal_exceptions_total"], {"exception_type": "InvalidRecord"}, invalid
            yield BY_NAME["dagger_batches_total"], {}, self.batches
            yield BY_NAME["dagger_batch_duration_seconds"], {}, (_cumulative(self.batch_buckets), self.batch_seconds)
            for phase, seconds in sorted(self.phase_seconds.items()):
                yield BY_NAME["dagger_batch_phase_seconds_total"], {"phase": phase}, seconds
            for table, n in sorted(self.parquet_files.items()):
                yield BY_NAME["dagger_parquet_files_read_total"], {"table": table}, n
                yield BY_NAME["dagger_parquet_rows_read_total"], {"table": table}, self.parquet_rows.get(table, 0)
            yield BY_NAME["dagger_state_rows"], {}, self.state_rows
            yield BY_NAME["dagger_state_memory_bytes"], {}, self.state_bytes
        yield from self._accumulated()
        yield from self._facts()

    def _accumulated(self) -> Iterator[tuple[Metric, dict[str, str], Any]]:
        """Counters Spark accumulators keep on the driver (summed from every task)."""
        job = self.job
        dead_letters = 0
        for sink in job.counters.progress_sinks:
            yield BY_NAME["dagger_sink_records_total"], {"sink": sink, "outcome": "written"}, self.output_rows
        for sink, kinds in sorted(job.counters.sinks.items()):
            for kind, outcome in SINK_OUTCOMES.items():
                if kind == "written" and sink in job.counters.progress_sinks:
                    continue  # Spark's sink wrote them: its own count, above (the accumulator stays 0)
                if kind in kinds:
                    value = kinds[kind].value
                    yield BY_NAME["dagger_sink_records_total"], {"sink": sink, "outcome": outcome}, value
                    if kind == "dead_letters":
                        dead_letters += value
                        yield BY_NAME["dagger_dead_letter_records_total"], {"origin": f"sink:{sink}"}, value
        for source, metrics in sorted(job.counters.lookups.items()):
            counts = metrics.values()
            for key, outcome in LOOKUP_OUTCOMES.items():
                if key in counts:
                    yield BY_NAME["dagger_external_calls_total"], {"source": source, "outcome": outcome}, counts[key]
            yield BY_NAME["dagger_external_cache_hits_total"], {"source": source}, counts.get("cache_hits", 0)
            yield BY_NAME["dagger_external_retries_total"], {"source": source}, counts.get("retries", 0)
            yield BY_NAME["dagger_external_response_seconds"], {"source": source}, metrics.latency.prometheus()
        if dead_letters:
            yield BY_NAME["dagger_non_fatal_exceptions_total"], {"exception_type": "RejectedRow"}, dead_letters
        failed = sum(
            metrics.values().get(key, 0)
            for metrics in job.counters.lookups.values()
            for key in ("failures_code404", "failures_code4XX", "failures_code5XX", "failures_other", "timeouts")
        )
        if failed:  # a failed lookup passed on (fail_on_errors: false); with fail_on_errors the job fails instead
            yield BY_NAME["dagger_non_fatal_exceptions_total"], {"exception_type": "LookupFailure"}, failed
        if job.counters.longbow is not None:
            counts = job.counters.longbow.values()
            for key, (role, outcome) in LONGBOW_OUTCOMES.items():
                yield BY_NAME["dagger_longbow_rows_total"], {"role": role, "outcome": outcome}, counts[key]
            yield BY_NAME["dagger_longbow_documents_read_total"], {}, counts["documents_read_per_scan"]
            for key, kind in (
                ("failed_on_write_document", "LongbowWriterException"),
                ("failed_on_read_document", "LongbowReaderException"),
            ):
                if counts[key]:  # Dagger reports each as a non-fatal exception
                    yield BY_NAME["dagger_non_fatal_exceptions_total"], {"exception_type": kind}, counts[key]
            for (role, outcome), histogram in job.counters.longbow.latency.items():
                labels = {"role": role, "outcome": outcome}
                yield BY_NAME["dagger_longbow_response_seconds"], labels, histogram.prometheus()
        context = job.counters.udf_context
        for name, accumulator in sorted(((context.counters if context else None) or {}).items()):
            yield BY_NAME["dagger_darts_total"], {"event": name.removeprefix("dart_")}, accumulator.value

    def _facts(self) -> Iterator[tuple[Metric, dict[str, str], Any]]:
        config: JobConfig = self.job.config
        streams = config.STREAMS
        sinks = config.sink_configs
        first = sinks[0].config.settings if sinks else None
        yield (
            BY_NAME["dagger_job_info"],
            {
                "sink_type": ",".join(entry.SINK_TYPE for _, entry in sinks),
                "input_topics": ",".join(source_of(s).topics(s) or "" for s in streams),
                "input_protos": ",".join(format_of(s).describe(s) for s in streams),
                "output_topic": (first.output_topic() if first else None) or "",
                "output_proto": (first.written_message() if first else None) or "",
            },
            1,
        )
        for udf in sorted(self.job.counters.functions_used):
            yield BY_NAME["dagger_udf_info"], {"udf": udf}, 1
        for stage, kind in processors(config):
            yield BY_NAME["dagger_processor_info"], {"stage": stage, "type": kind}, 1
        for kind in self.job.counters.longbow.processor_types if self.job.counters.longbow is not None else ():
            yield BY_NAME["dagger_processor_info"], {"stage": "post", "type": kind}, 1


def processors(config: JobConfig) -> list[tuple[str, str]]:
    """``(stage, type)`` of each pre- and post-processor the job runs."""
    out = []
    pre = config.PROCESSOR_PREPROCESSOR_CONFIG if config.PROCESSOR_PREPROCESSOR_ENABLE else None
    for table in pre.table_transformers if pre else []:
        out += [("pre", t.transformation_class.rsplit(".", 1)[-1]) for t in table.transformers]
    post = config.PROCESSOR_POSTPROCESSOR_CONFIG if config.PROCESSOR_POSTPROCESSOR_ENABLE else None
    if post:
        for kind, entries in post.external_source.items():
            out += [("post", kind)] * len(entries)
        out += [("post", f"internal_{s.type}") for s in post.internal_source]
        out += [("post", t.transformation_class.rsplit(".", 1)[-1]) for t in post.transformers]
    return sorted(set(out))


def invalid_counts(progress: dict[str, Any]) -> dict[str, tuple[bool, int]]:
    """Table → (filtered by the InvalidRecordFilterTransformer, undecodable records) that a progress's observed
    metrics counted (``invalid_records_<table>``, ``filtered_invalid_records_<table>``)."""
    out = {}
    for name, values in (progress.get("observedMetrics") or {}).items():
        for prefix in ("invalid_records_", "filtered_invalid_records_"):
            if name.startswith(prefix):
                out[name.removeprefix(prefix)] = (prefix.startswith("filtered"), int(_get(values, "count") or 0))
    return out


def partition_lag(source: dict[str, Any]) -> tuple[str, dict[tuple[str, str], int]]:
    """A progress source's stream (its ``@table`` tag) and each partition's lag: the latest offset the reader
    reported minus the end offset the batch processed to."""
    from dagger.kafka.source.spec import STREAM_KEY  # start-up: loads google

    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    table = end.get(STREAM_KEY) or latest.get(STREAM_KEY) or str(source.get("description", "?"))
    lags = {}
    for key, high in latest.items():
        if key == STREAM_KEY or not isinstance(high, int):
            continue
        topic, _, partition = key.rpartition(":")
        done = end.get(key)
        lags[(topic, partition)] = max(high - done, 0) if isinstance(done, int) else high
    return table, lags


def max_lag(progress: dict[str, Any]) -> int | None:
    """The largest partition lag of a progress (None without Kafka offsets)."""
    lags = [lag for source in progress.get("sources") or [] for lag in partition_lag(source)[1].values()]
    return max(lags) if lags else None


def _get(values: Any, key: str) -> Any:
    if isinstance(values, dict):
        return values.get(key)
    return getattr(values, key, None) if not hasattr(values, "asDict") else values.asDict().get(key)


def _running(counts: list[int]) -> list[int]:
    out, total = [], 0
    for n in counts:
        total += n
        out.append(total)
    return out


def _cumulative(buckets: list[int]) -> list[tuple[float, int]]:
    running = _running(buckets)
    return [*zip(BATCH_BUCKETS, running[:-1], strict=True), (float("inf"), running[-1])]
