"""StreamManager: the plan of a job, from its config to a started Spark query.

Stages, in Dagger's order:

1. load descriptors (:mod:`dagger.schema.registry`) and check them against the checkpoint;
2. for each stream: build the source DataFrame, count and remove invalid rows (``drop`` / ``dead-letter``
   policies; observed as ``invalid_records_<table>``), watermark it on rowtime by
   ``FLINK_WATERMARK_DELAY_MS`` and register it as a temporary view named ``INPUT_SCHEMA_TABLE``;
3. rewrite Dagger's (Flink's) SQL (:mod:`dagger.sql.rewrite`) and run it, then the post-processors;
4. pick the output mode: append where Spark allows it, else update (Dagger emits every update of a
   non-windowed aggregation);
5. start the query, writing each micro-batch to every sink through the ``dagger-sink`` writer, with the session
   tuned for the job (:mod:`dagger.session_tuning`) and its own files under the checkpoint
   (:mod:`dagger.checkpoint`).

Running it (signals, the loop, stop conditions, progress, the exit code) is :mod:`dagger.runner`'s.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger.config.ignored import ignored_keys_set
from dagger.config.model import JobConfig
from dagger.errors import DaggerConfigError, DescriptorFetchError, SqlError
from dagger.longbow.schema import LongbowKind, LongbowSchema, check_types, duration_ms, longbow_schema
from dagger.serde.types import VALIDITY_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from dagger.bounded import BoundedRun
    from dagger.checkpoint import CheckpointStore
    from dagger.config.model import StreamConfig
    from dagger.functions import FunctionCatalog
    from dagger.processors.transformers.base import ProcessorContext
    from dagger.schema.registry import DescriptorSet
    from dagger.sinks.base import Sink
    from dagger.sources.base import Source

log = logging.getLogger("dagger")


@dataclass
class Plan:
    """What a job will run: used by ``dagger validate`` and by :meth:`StreamManager.start`."""

    sql: str
    rewritten_sql: str
    tables: dict[str, StructType]
    output_schema: StructType | None = None
    output_mode: str = "append"
    sinks: list[Sink] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dataframe: DataFrame | None = None
    #: what the SQL rewrite changed and why (Flink forms, key-less joins), shown by ``dagger validate``
    notes: list[str] = field(default_factory=list)
    #: the operators whose state grows with their keys forever (:mod:`dagger.sql.state`); empty for bounded runs
    unbounded_state: list[str] = field(default_factory=list)
    #: the Longbow the SQL output's columns ask for (:mod:`dagger.longbow.schema`), None without one
    longbow: LongbowSchema | None = None


class StreamManager:
    """Build and run one job.

    Parameters
    ----------
    config:
        The validated job config.
    checkpoint_dir:
        Overrides ``SPARK_CHECKPOINT_LOCATION``.
    available_now:
        Process what the sources hold now, emit every window the watermark closes, and stop.
    spark:
        An existing session (tests); by default one is created from the config.
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
    ):
        self.config = config
        #: planned for ``dagger validate`` only: nothing is asked of the brokers (a real-time stream's group offsets)
        self.validating = validating
        self.from_ms, self.to_ms = from_ms, to_ms
        self.available_now = available_now
        self.checkpoint = (
            checkpoint_dir or config.SPARK_CHECKPOINT_LOCATION or str(Path("checkpoints") / config.job_slug)
        )
        self._spark = spark
        self._descriptors = None
        self._commit_offsets = commit_offsets
        self._catalog = None
        self.udf_context = None
        self.sink_counters: dict[str, dict[str, Any]] = {}
        self.query = None
        #: the plan the job was started with (output mode, tables, sinks, rewrite notes)
        self.planned: Plan | None = None
        self._observations: dict[str, Any] = {}
        self._processor_observations: dict[str, Any] = {}
        #: external source label (``HTTP.0``) → its metrics (calls, failures by kind, latency histogram)
        self.lookup_metrics: dict[str, Any] = {}
        #: classic Longbow's counters (Dagger's longbow.writer / longbow.reader meters), when the SQL asks for it
        self.longbow_metrics: Any = None
        #: session settings the job's processors asked for (ProcessorContext.session_settings)
        self._processor_settings: dict[str, str] = {}
        self._sinks: tuple[Any, list[Sink]] | None = None  # (the descriptor sets they were built for, the sinks)
        #: what each bounded stream reads (Parquet files, Kafka ranges)
        self.inputs: list[Any] = []
        self.progress_sinks: list[str] = []  # JobView: a real-time query's Kafka sink, counted by Spark itself
        self._committed_batch = -1  # the last real-time batch whose offsets went to the consumer groups
        self.functions_used: list[str] = []
        self._store = None
        self.bounded = self._is_bounded()
        #: Spark's real-time mode: streams read by Spark's Kafka source, one Kafka sink (dagger.realtime)
        self.real_time = config.SPARK_TRIGGER_MODE == "real-time"
        #: while this file exists, live sources admit no new input (:meth:`hold_input`)
        self.hold_file = str(Path(tempfile.gettempdir()) / f"dagger-hold-{config.job_slug}-{uuid.uuid4().hex[:8]}")

    def _is_bounded(self) -> bool:
        """True when every stream has an end (Parquet, or Kafka with an end position or ``--to``)."""
        from dagger.sources import source_of

        kinds = {s.INPUT_SCHEMA_TABLE: source_of(s).is_bounded(s, self.to_ms) for s in self.config.STREAMS}
        if all(kinds.values()):
            return True
        if any(kinds.values()):
            bounded = ", ".join(t for t, b in kinds.items() if b)
            unbounded = ", ".join(t for t, b in kinds.items() if not b)
            raise DaggerConfigError(
                f"STREAMS: {bounded} bounded but {unbounded} not; a job reads either bounded streams (Parquet, "
                "or Kafka with SOURCE_KAFKA_ENDING_OFFSETS / SOURCE_KAFKA_ENDING_TIMESTAMP or `dagger run --to`) "
                "or unbounded ones"
            )
        return False

    # -- building ----------------------------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from dagger.spark import get_session

            self._spark = get_session(self.config)
        return self._spark

    @property
    def descriptors(self) -> DescriptorSet:
        if self._descriptors is None:
            from dagger.schema.registry import SchemaRegistry, StencilSettings

            try:
                self._descriptors = SchemaRegistry(StencilSettings.from_config(self.config)).get()
            except DescriptorFetchError as exc:
                self._descriptors = self._kept_descriptors(exc)
        return self._descriptors

    @property
    def refresh_seconds(self) -> float | None:
        """How often a running job fetches its descriptor sets again (``SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH``
        with ``SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS``); None: never (off, or a bounded run)."""
        if self.bounded or not self.config.SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH:
            return None
        return max(self.config.SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS / 1000, 1.0)

    def fetch_descriptors(self) -> DescriptorSet | None:
        """The descriptor sets fetched again, when they differ from the ones the job runs with (None when they do
        not, or cannot be fetched: the job goes on with what it has, as Dagger's Stencil cache does)."""
        from dagger.schema.registry import SchemaRegistry, StencilSettings

        try:
            fresh = SchemaRegistry(StencilSettings.from_config(self.config)).get()
        except DescriptorFetchError as exc:
            log.warning("descriptor refresh failed, going on with the sets the job runs with: %s", exc)
            return None
        return fresh if fresh.sha256 != self.descriptors.sha256 else None

    def descriptor_changes(self, fresh: DescriptorSet) -> tuple[list[str], list[str]]:
        """``(problems, added)`` of switching the running query to ``fresh``: fields the query uses that were
        removed or retyped (as the restart check names them), and the columns ``fresh`` adds."""
        from dagger.schema.compat import incompatibilities, snapshot
        from dagger.serde.formats import stream_table
        from dagger.sql.rewrite import referenced_columns

        rowtime = self.config.FLINK_ROWTIME_ATTRIBUTE_NAME
        streams = [s for s in self.config.STREAMS if s.INPUT_DATATYPE == "PROTO"]
        before = snapshot(
            self.descriptors.sha256, {s.INPUT_SCHEMA_TABLE: stream_table(s, self.descriptors, rowtime) for s in streams}
        )
        try:
            after = snapshot(fresh.sha256, {s.INPUT_SCHEMA_TABLE: stream_table(s, fresh, rowtime) for s in streams})
        except Exception as exc:  # noqa: BLE001 - a message gone from the new sets: name it
            return [f"the new descriptor sets cannot describe the streams: {exc}"], []
        used = referenced_columns(self.planned.rewritten_sql) if self.planned is not None else None
        problems = incompatibilities(before, after, used)
        added = [
            f"{table}.{name}"
            for table, columns in after["tables"].items()
            for name in columns
            if name not in before["tables"].get(table, {})
        ]
        return problems, added

    def adopt_descriptors(self, fresh: DescriptorSet) -> None:
        """Run with ``fresh`` from the next :meth:`plan` on."""
        self._descriptors = fresh
        self.planned = None

    def _kept_descriptors(self, failure: DescriptorFetchError) -> DescriptorSet:
        """The descriptor sets the checkpoint keeps, when their server is down at a restart; else ``failure``."""
        from dagger.schema.compat import kept_copy
        from dagger.schema.registry import DescriptorSet

        try:
            kept = kept_copy(self.store)
        except Exception:  # noqa: BLE001 - no readable copy: the fetch failure is what the user must see
            kept = None
        if kept is None:
            raise failure
        sha256, blobs = kept
        log.warning(
            "%s; going on with the copy of the descriptor sets this job's checkpoint keeps (sha256 %s, from %s)",
            str(failure).split(". Check")[0],
            sha256[:12],
            ", ".join(source for source, _ in blobs),
        )
        return DescriptorSet(blobs)

    def check_descriptors(self) -> None:
        """Resolve every stream's records (message or JSON Schema) and rowtime field before Spark starts (config
        errors → exit 2)."""
        from dagger.serde.formats import check_records

        for stream in self.config.STREAMS:
            check_records(stream, self.descriptors)
        self.sinks()  # each sink resolves the messages it writes

    def sinks(self) -> list[Sink]:
        """The job's sinks, built once (for the descriptor sets in use; a schema refresh builds them again)."""
        from dagger.sinks import build_sinks

        if self._sinks is None or self._sinks[0] is not self.descriptors:
            self._sinks = (self.descriptors, build_sinks(self.config, self.descriptors))
        return self._sinks[1]

    def register_streams(self, sql: str | None = None) -> dict[str, StructType]:
        """Create, clean, watermark and register every stream; returns table → schema (all its columns).

        With the query ``sql`` (as run), Kafka streams decode only the fields it can read.
        """
        from pyspark.sql import functions as F

        from dagger.sources import SourceOptions, register_data_sources, source_of

        register_data_sources(self.spark)
        event_time = self._reads_event_time(sql)
        options = SourceOptions(
            commit_offsets=self._commit_offsets and self.from_ms is None and self.to_ms is None,
            bounded=self.bounded,
            from_ms=self.from_ms,
            to_ms=self.to_ms,
            fields=self._pruned_fields(sql),
            event_time=event_time,
            hold_file=self.hold_file,
        )
        delay = f"{self.config.FLINK_WATERMARK_DELAY_MS} milliseconds"
        rowtime = self.config.FLINK_ROWTIME_ATTRIBUTE_NAME
        from dagger import realtime
        from dagger.processors import check_preprocessor_tables, filters_invalid_records, preprocess

        check_preprocessor_tables(self.config)
        tables = {}
        for stream in self.config.STREAMS:
            # Dagger's InvalidRecordFilterTransformer receives undecodable records instead of the source failing
            filtered_later = filters_invalid_records(self.config, stream.INPUT_SCHEMA_TABLE)
            if filtered_later:
                stream = source_of(stream).passing_invalid_records(stream)
            if self.real_time and not realtime.stream_refusals(stream):
                df = realtime.json_stream(self.spark, stream, self.config, resolve=not self.validating)
            else:
                df = source_of(stream).build(self.spark, stream, self.config, self.descriptors, options)
            tables[stream.INPUT_SCHEMA_TABLE] = df.schema
            if stream.INPUT_SCHEMA_TABLE in options.fields:
                from dagger.serde.formats import stream_table

                tables[stream.INPUT_SCHEMA_TABLE] = stream_table(stream, self.descriptors, rowtime)
            invalid = F.count(F.when(~F.col(VALIDITY_COLUMN), 1)).alias("count")
            if self.bounded:  # a batch query reports through Observation objects
                from pyspark.sql import Observation

                observation = Observation(f"input_{stream.INPUT_SCHEMA_TABLE}")
                self._observations[stream.INPUT_SCHEMA_TABLE] = observation
                df = df.observe(observation, F.count(F.lit(1)).alias("rows"), invalid)
                self.inputs.append(source_of(stream).input_description(self.spark, stream, self.from_ms, self.to_ms))
            if source_of(stream).invalid_record_policy(stream) in ("drop", "dead-letter") and not filtered_later:
                if not self.bounded:
                    df = df.observe(f"invalid_records_{stream.INPUT_SCHEMA_TABLE}", invalid)
                df = df.where(F.col(VALIDITY_COLUMN))
            df = df.withWatermark(rowtime, delay)
            if event_time and not self.bounded:
                df = self._event_time_barrier(df, stream.INPUT_SCHEMA_TABLE, rowtime)
            df = preprocess(df, stream.INPUT_SCHEMA_TABLE, self._processor_context("pre", stream.INPUT_SCHEMA_TABLE))
            df.createOrReplaceTempView(stream.INPUT_SCHEMA_TABLE)
        return tables

    @staticmethod
    def _event_time_barrier(df: DataFrame, table: str, rowtime: str) -> DataFrame:
        """Every record of the stream advances event time, as in Flink, whatever the query keeps.

        Spark's optimizer moves a ``WHERE`` that does not read ``rowtime`` below the watermark, so only the rows
        the query keeps would advance it (a filtered stream's last windows never close). It moves filters through
        projections, not through ``observe``, so the observed metrics right above the watermark hold every filter
        above them, for plain SQL, pre-processors and joins alike. They count the stream's rows and its latest
        event time (``events_<table>`` in the query progress).
        """
        from pyspark.sql import functions as F

        return df.observe(
            f"events_{table}", F.count(F.lit(1)).alias("rows"), F.max(F.col(rowtime)).alias("max_event_time")
        )

    def _reads_event_time(self, sql: str | None) -> bool:
        """Whether anything the job runs depends on the watermark (so Kafka partitions are read aligned in event
        time): its SQL groups, aggregates, joins or deduplicates, or it has transformers (their own SQL or state).
        A job that only filters and projects never drops a record as late and reads by offsets, without waiting."""
        from dagger.sql.rewrite import reads_event_time

        if sql is None or reads_event_time(sql):
            return True
        post = self.config.PROCESSOR_POSTPROCESSOR_CONFIG if self.config.PROCESSOR_POSTPROCESSOR_ENABLE else None
        pre = self.config.PROCESSOR_PREPROCESSOR_CONFIG if self.config.PROCESSOR_PREPROCESSOR_ENABLE else None
        return bool((post and post.transformers) or (pre and pre.table_transformers))

    def _pruned_fields(self, sql: str | None) -> dict[str, list[str]]:
        """Table → the fields its Kafka reader decodes, for the tables that need fewer than all."""
        from dagger.processors import table_transformers
        from dagger.schema.projection import source_fields
        from dagger.sources import source_of
        from dagger.sql.rewrite import referenced_columns

        if sql is None or not self.config.SPARK_PRUNE_INPUT_COLUMNS:
            return {}
        used = referenced_columns(sql)
        pruned = {}
        for stream in self.config.STREAMS:
            table = stream.INPUT_SCHEMA_TABLE
            if (
                not source_of(stream).decodes_named_fields
                or stream.INPUT_DATATYPE != "PROTO"
                or table_transformers(self.config, table)
            ):
                continue  # pre-processors may read any column; JSON records are read whole
            descriptor = self.descriptors.find_message(stream.format.INPUT_SCHEMA_PROTO_CLASS)
            fields = source_fields(descriptor, used, stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX)
            if fields is not None:
                pruned[table] = fields
                log.info(
                    "stream '%s' decodes %d of %d fields: %s",
                    table,
                    len(fields),
                    len(descriptor.fields),
                    ", ".join(fields),
                )
        return pruned

    def _processor_context(self, stage: str, table: str = "NULL") -> ProcessorContext:
        from dagger.processors.transformers import ProcessorContext

        return ProcessorContext(
            spark=self.spark,
            config=self.config,
            descriptors=self.descriptors,
            macros=self.register_functions().macros,
            stage=stage,
            table_name=table,
            bounded=self.bounded,
            observations=self._processor_observations,
            lookups=self.lookup_metrics,
            session_settings=self._processor_settings,
        )

    def register_functions(self, texts: list[str] | None = None) -> FunctionCatalog:
        """Register the function library, factory modules and Python UDF files once; returns the catalog.

        With ``texts`` (everything the job runs: its rewritten SQL and its settings), only the functions they
        can reach are registered (:meth:`~dagger.functions.FunctionCatalog.needed`).
        """
        from dagger.functions import register, udf_context

        catalog = self.function_catalog()
        if self.udf_context is None:
            self.udf_context = udf_context(self.spark, self.config, self.descriptors)
            only = catalog.needed(texts) if texts is not None else None
            #: the functions the job's SQL calls by name (telemetry's dagger_udf_info, Dagger's udf/<Name> gauges)
            self.functions_used = sorted(catalog.needed([self.config.sql]))
            register(self.spark, catalog, self.udf_context, sql_functions=False, only=only)  # the SQL inlines them
        return catalog

    def function_catalog(self) -> FunctionCatalog:
        """The job's functions: the library, ``FUNCTION_FACTORY_CLASSES`` and ``PYTHON_UDF_CONFIG`` files."""
        from dagger.functions import build_catalog
        from dagger.python_udfs import load_python_udfs

        if self._catalog is None:
            self._catalog = build_catalog(self.config, load_python_udfs(self.config, self.spark))
        return self._catalog

    def plan(self) -> Plan:
        """Everything short of starting the query: streams, SQL, output schema, mode, sink checks."""
        from pyspark.errors import AnalysisException, ParseException
        from pyspark.sql.pandas.types import to_arrow_schema

        from dagger.serde.variant import without_variants
        from dagger.session_tuning import ROCKSDB_STATE_STORE, STATE_STORE_PROVIDER
        from dagger.sql.retention import running_aggregates
        from dagger.sql.rewrite import rewrite_query
        from dagger.sql.state import unbounded_state

        self.check_descriptors()
        rewrite = rewrite_query(
            self.config.sql,
            self.function_catalog().macros,
            self._declared_schemas(),
            self.config.FLINK_RETENTION_IDLE_STATE_MINUTE,
            self.config.FLINK_ROWTIME_ATTRIBUTE_NAME,
        )
        rewritten = rewrite.sql
        self.register_functions([rewritten, self.config.model_dump_json()])
        tables = self.register_streams(rewritten)
        running = None
        try:
            df = self.spark.sql(rewritten)
            if not self.bounded:  # a GROUP BY that forgets idle keys, as Dagger's retention
                running = running_aggregates(
                    self.spark,
                    rewritten,
                    df.columns,
                    self.config.FLINK_RETENTION_IDLE_STATE_MINUTE,
                    self.config.FLINK_ROWTIME_ATTRIBUTE_NAME,
                )
                if running:
                    df = running[0]
        except (AnalysisException, ParseException) as exc:
            raise SqlError(
                f"FLINK_SQL_QUERY is not valid Spark SQL: {_first_line(exc)}\nquery as run: {rewritten}"
            ) from None
        longbow = longbow_schema(df.columns, self.config.FLINK_ROWTIME_ATTRIBUTE_NAME)
        if longbow is not None:  # switched on by the output's column names, as in Dagger (before post-processors)
            check_types(longbow, df.schema)
            from dagger.longbow.classic import LongbowMetrics, classic_longbow
            from dagger.longbow.plus import plus_reader, plus_writer

            metrics = self.longbow_metrics = LongbowMetrics.create(self.spark, longbow.kind)
            on_state = self.config.PROCESSOR_LONGBOW_STORE == "state"
            if on_state and (longbow.kind is not LongbowKind.CLASSIC or self.bounded):
                raise DaggerConfigError(
                    "PROCESSOR_LONGBOW_STORE=state keeps classic Longbow's history in this job's own state: "
                    + (
                        "a bounded run has none; use bigtable"
                        if self.bounded
                        else f"Longbow type {longbow.kind.label} shares its table between jobs; use bigtable"
                    )
                )
            if on_state:
                from dagger.longbow.state import state_longbow

                self._processor_settings[STATE_STORE_PROVIDER] = ROCKSDB_STATE_STORE  # transformWithState needs it
                df = state_longbow(df, longbow, self.config, metrics)
            elif longbow.kind is LongbowKind.CLASSIC:
                df = classic_longbow(df, longbow, self.config, metrics)
            elif longbow.kind is LongbowKind.WRITER:
                df = plus_writer(df, longbow, self.config, self.descriptors, metrics)
            else:
                df = plus_reader(df, longbow, self.config, metrics)
        from dagger.processors import postprocess

        df = postprocess(df, self._processor_context("post"))
        plan = Plan(self.config.sql, rewritten, tables, df.schema, dataframe=df, notes=rewrite.notes, longbow=longbow)
        if running:
            plan.notes.append(running[1])
            self._processor_settings[STATE_STORE_PROVIDER] = ROCKSDB_STATE_STORE  # transformWithState needs it
        if not self.bounded:
            plan.unbounded_state = unbounded_state(
                rewritten, self.config.FLINK_ROWTIME_ATTRIBUTE_NAME, retained=running is not None
            )
        plan.output_mode = "batch (bounded input)" if self.bounded else self._output_mode(df)
        plan.sinks = self.sinks()
        if self.real_time:
            from dagger import realtime
            from dagger.sql.rewrite import reads_event_time

            refused = realtime.refusals(self.config, self.bounded, self.available_now, reads_event_time(rewritten), df)
            plan.problems.extend(f"SPARK_TRIGGER_MODE=real-time: {why}" for why in refused)
            plan.output_mode = "update (real-time mode)"
        # VARIANT columns (untyped lookup outputs) take their values' type per batch: checked when written
        arrow_schema = without_variants(to_arrow_schema(df.schema, timezone="UTC"))
        for sink in plan.sinks:
            plan.problems.extend(sink.check(arrow_schema))
        return plan

    def _ensure_longbow_table(self) -> None:
        """Create Longbow's Bigtable table with Dagger's GC rule unless it exists (a failure stops the job)."""
        from dagger.longbow.bigtable import ensure_table
        from dagger.longbow.classic import table_name

        name = table_name(self.config)
        max_age = duration_ms(self.config.PROCESSOR_LONGBOW_DOCUMENT_DURATION, "PROCESSOR_LONGBOW_DOCUMENT_DURATION")
        if ensure_table(name, max_age, self.config.PROCESSOR_LONGBOW_ASYNC_TIMEOUT / 1000):
            log.info(
                "Longbow: created Bigtable table %s (one version per cell, kept %s)",
                name.path,
                self.config.PROCESSOR_LONGBOW_DOCUMENT_DURATION,
            )
        else:
            log.info("Longbow: history in Bigtable table %s", name.path)

    def _declared_schemas(self) -> dict[str, StructType]:
        """Table → the schema its message gives it (before any pre-processor), for the SQL rewrite."""
        from dagger.serde.formats import stream_table

        rowtime = self.config.FLINK_ROWTIME_ATTRIBUTE_NAME
        return {
            s.INPUT_SCHEMA_TABLE: stream_table(s, self.descriptors, rowtime)
            for s in self.config.STREAMS
            if s.INPUT_DATATYPE == "JSON" or s.format.INPUT_SCHEMA_PROTO_CLASS
        }

    def _output_mode(self, df: DataFrame) -> str:
        if self.config.SPARK_OUTPUT_MODE != "auto":
            return self.config.SPARK_OUTPUT_MODE
        jvm = self.spark._jvm
        checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
        plan = df._jdf.queryExecution().analyzed()
        try:
            checker.checkForStreaming(plan, jvm.org.apache.spark.sql.streaming.OutputMode.Append())
            return "append"
        except Exception:  # noqa: BLE001 - py4j wraps the AnalysisException
            pass
        try:
            checker.checkForStreaming(plan, jvm.org.apache.spark.sql.streaming.OutputMode.Update())
            return "update"
        except Exception as exc:  # noqa: BLE001
            raise SqlError(f"Spark cannot run this query as a stream: {_first_line(exc)}") from None

    # -- running -----------------------------------------------------------------------------------------

    def start(self, plan: Plan | None = None) -> StreamingQuery | BoundedRun:
        """Start the streaming query and return it."""
        from dagger.schema.compat import check_and_record, keep_copy, snapshot
        from dagger.sinks.spark_writer import SINK_FORMAT, encode_sinks, write_micro_batch
        from dagger.sql.rewrite import referenced_columns
        from dagger.sql.state import retention_note

        plan = self.planned = plan or self.plan()
        if plan.problems:
            what = "the job cannot run" if self.real_time else "the SQL output does not fit the sink"
            raise DaggerConfigError(f"{what}:\n  - " + "\n  - ".join(plan.problems))
        from dagger.session_tuning import tune

        tune(self.spark, self.config, self.store.local, self._processor_settings)
        for note in plan.notes:
            log.info("SQL rewrite: %s", note)
        for note in plan.unbounded_state:
            log.warning(
                "state without bound: %s (%s)", note, retention_note(self.config.FLINK_RETENTION_IDLE_STATE_MINUTE)
            )
        for key, reason in ignored_keys_set(self.config):
            log.warning("%s is accepted and ignored: %s", key, reason)
        on_bigtable = self.config.PROCESSOR_LONGBOW_STORE == "bigtable"
        if plan.longbow is not None and plan.longbow.kind is not LongbowKind.READER and on_bigtable:  # writers own it
            self._ensure_longbow_table()
        if self.config.sink_type_note:
            log.warning("%s", self.config.sink_type_note)
        if self.bounded:
            return self._start_bounded(plan)
        check_and_record(
            self.store, snapshot(self.descriptors.sha256, plan.tables), referenced_columns(plan.rewritten_sql)
        )
        keep_copy(self.store, self.descriptors.sha256, self.descriptors.blobs)
        if self.real_time:
            from dagger import realtime

            log.info(
                "starting %r in real-time mode: %d stream(s) by Spark's Kafka source -> %s, checkpoint every %d ms, %s",
                self.config.FLINK_JOB_ID,
                len(plan.tables),
                "; ".join(s.describe() for s in plan.sinks),
                self.config.SPARK_REALTIME_CHECKPOINT_INTERVAL_MS,
                self.checkpoint,
            )
            self.progress_sinks = [s.display_name for s in plan.sinks]
            self.query = realtime.start(plan.dataframe, self.config, self.checkpoint, self.config.job_slug)
            return self.query
        self._prepare_sinks(plan.sinks)
        sinks = encode_sinks(plan.sinks)
        writer = plan.dataframe.writeStream.option("checkpointLocation", self.checkpoint).outputMode(plan.output_mode)
        writer = writer.queryName(self.config.job_slug)
        if plan.output_mode == "append":
            writer = writer.format(SINK_FORMAT).option("sinks", sinks)
        else:  # Python streaming writers are append-only; update/complete go through foreachBatch
            writer = writer.foreachBatch(write_micro_batch(sinks))
        if self.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.config.SPARK_TRIGGER_INTERVAL_MS} milliseconds")
        log.info(
            "starting %r on master %s: %d stream(s) -> %s, output mode %s, checkpoint %s, descriptors sha256 %s",
            self.config.FLINK_JOB_ID,
            plan.dataframe.sparkSession.sparkContext.master,
            len(plan.tables),
            "; ".join(s.describe() for s in plan.sinks),
            plan.output_mode,
            self.checkpoint,
            self.descriptors.sha256[:12],
        )
        self.query = writer.start()
        return self.query

    @property
    def store(self) -> CheckpointStore:
        """The job's own files under the checkpoint (descriptor pin, bounded runs, sink markers), where Spark puts
        its own: a plain path is qualified by Hadoop's ``fs.defaultFS`` (HDFS on many clusters, else the disk)."""
        if self._store is None:
            from dagger.checkpoint import CheckpointStore, has_scheme

            location = self.checkpoint
            if not has_scheme(location):
                jvm = self.spark._jvm
                path = jvm.org.apache.hadoop.fs.Path(location)
                conf = self.spark.sparkContext._jsc.hadoopConfiguration()
                location = str(path.getFileSystem(conf).makeQualified(path).toString())
            self._store = CheckpointStore(location, self.config.SPARK_CONF.get("spark.hadoop.fs.s3a.endpoint"))
        return self._store

    def _start_bounded(self, plan: Plan) -> BoundedRun:
        """Run the SQL once over the bounded input and write the result to every sink as one batch."""
        from dagger.bounded import BoundedRun, batch_id_for, fingerprint, record_run
        from dagger.sinks.spark_writer import encode_sinks, write_micro_batch

        self._prepare_sinks(plan.sinks)
        print_ = fingerprint(self.inputs)
        batch_id = batch_id_for(self.store, print_)
        write = write_micro_batch(encode_sinks(plan.sinks))

        def work() -> dict[str, Any]:
            write(plan.dataframe, batch_id)
            record_run(self.store, print_, batch_id)
            rows, observed = {}, {}
            for table, observation in self._observations.items():
                values = observation.get
                rows[table] = values.get("rows", 0)
                observed[f"invalid_records_{table}"] = {"count": values.get("count", 0)}
            for name, observation in self._processor_observations.items():
                observed[name] = dict(observation.get)
            return {"rows": rows, "observed": observed}

        log.info(
            "starting %r on master %s: %d bounded stream(s) -> %s, one batch query (batch %d of %s), "
            "descriptors sha256 %s",
            self.config.FLINK_JOB_ID,
            self.spark.sparkContext.master,
            len(plan.tables),
            "; ".join(s.describe() for s in plan.sinks),
            batch_id,
            self.checkpoint,
            self.descriptors.sha256[:12],
        )
        for sink in plan.sinks:
            log.info("sink %s: a re-run over input already written %s", sink.display_name, sink.rerun)
        self.query = BoundedRun(self.spark, self.config.job_slug, batch_id, work).start()
        return self.query

    def _prepare_sinks(self, sinks: list[Sink]) -> None:
        """Give each sink its counters and state directory, and let it set up its destination."""
        from dagger.sinks.base import COUNTERS

        context = self.spark.sparkContext
        self.sink_counters = {}
        for sink in sinks:
            counters = {kind: context.accumulator(0) for kind in COUNTERS}
            sink.attach(counters, self.store.below(f"sinks/{sink.display_name}"))
            self.sink_counters[sink.display_name] = counters
            sink.prepare()

    def hold_input(self) -> None:
        """Live sources plan no new input from now on: the running micro-batch is the last one (a stop)."""
        Path(self.hold_file).touch()

    def release_input(self) -> None:
        """Undo :meth:`hold_input` (the query is stopped; a restarted one reads on)."""
        Path(self.hold_file).unlink(missing_ok=True)

    def progress_view(self, progress: dict[str, Any]) -> dict[str, Any]:
        """JobView: ``progress`` with Spark's Kafka sources' offsets in our reader's form (real-time mode)."""
        if not self.real_time:
            return progress
        from dagger import realtime

        return realtime.tagged_progress(progress, self.config)

    def after_batches(self, query: StreamingQuery) -> None:
        """Called by the runner between its waits on a running query: a real-time query's finished batch commits
        its end offsets to each stream's consumer group (our reader commits its own as it plans the next
        micro-batch)."""
        progress = query.lastProgress if self.real_time and self._commit_offsets else None
        if not progress or progress.get("batchId", -1) <= self._committed_batch:
            return
        self._finish_sources(progress)
        self._committed_batch = progress["batchId"]

    def finish(self, query: StreamingQuery | BoundedRun) -> None:
        """Once a live run stopped cleanly: let each source finish its streams (the Kafka source commits the last
        processed offsets to each stream's group). Bounded runs and replays leave the groups alone."""
        if not self._commit_offsets or self.bounded or self.from_ms is not None or query.exception() is not None:
            return
        if self.real_time:
            self.after_batches(query)
        else:
            self._finish_sources(query.lastProgress or {})

    def _finish_sources(self, progress: dict[str, Any]) -> None:
        """Hand ``progress`` (in our reader's form: :meth:`progress_view`) to each source with its streams."""
        from dagger.sources import source_of

        by_source: dict[int, tuple[Source, list[StreamConfig]]] = {}
        for stream in self.config.STREAMS:
            source = source_of(stream)
            by_source.setdefault(id(source), (source, []))[1].append(stream)
        for source, streams in by_source.values():
            source.finish(self.progress_view(progress), streams, self.config)


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "getMessage", lambda: str(exc))() if hasattr(exc, "getMessage") else str(exc)
    return str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__
