"""What a job will run, short of starting it: the SQL rewritten (:mod:`dagger.sql.rewrite`) and run over the
input tables, idle-key retention, Longbow, the post-processors, the output mode and each sink's check of the
output schema. ``dagger validate`` shows the :class:`Plan`; :mod:`dagger.job.start` starts it. Runs on the driver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dagger.job.descriptors as descriptors
import dagger.job.functions as functions
from dagger.catalog import build_sinks, sink_problems
from dagger.dead_letter import DeadLetterSpec
from dagger.errors import DaggerConfigError, SqlError
from dagger.formats.table import stream_table
from dagger.job.inputs import reads_event_time, register_streams
from dagger.kafka import spark_connector
from dagger.kafka.spark_connector import connector_refusals, python_nodes
from dagger.longbow.classic import LongbowMetrics, classic_longbow
from dagger.longbow.plus import plus_reader, plus_writer
from dagger.longbow.schema import LongbowKind, LongbowSchema, check_types, longbow_schema
from dagger.longbow.state import state_longbow
from dagger.plugins.format import format_of
from dagger.processors import postprocess
from dagger.serde.variant import without_variants
from dagger.session.spark import start_deferred_forkserver
from dagger.session.tuning import ROCKSDB_STATE_STORE, STATE_STORE_PROVIDER

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dagger.job.context import JobContext
    from dagger.plugins.sink import Sink

log = logging.getLogger("dagger")


@dataclass
class Plan:
    """What a job will run: shown by ``dagger validate``, started by :meth:`dagger.job.Job.start`."""

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
    #: what real-time mode holds and needs (its task slots), shown by ``dagger validate``
    real_time: list[str] = field(default_factory=list)
    #: the Longbow the SQL output's columns ask for (:mod:`dagger.longbow.schema`), None without one
    longbow: LongbowSchema | None = None
    #: which Kafka connector a micro-batch job reads and writes with, and why (``SPARK_KAFKA_CONNECTOR``)
    connector: str | None = None


def sinks(ctx: JobContext) -> list[Sink]:
    """The job's sinks, built once (for the descriptor sets in use; a schema refresh builds them again)."""

    in_use = descriptors.current(ctx)
    if ctx.built_sinks is None or ctx.built_sinks[0] is not in_use:
        built = build_sinks(ctx.config, in_use)
        if ctx.fixtures is not None:  # dagger test: kept, not sent; dead letters in the case's directory
            for sink in built:
                sink.capture = ctx.fixtures.capture_dir(sink)
                if sink.dead_letter is not None:
                    sink.dead_letter = DeadLetterSpec(ctx.config.job_slug, path=ctx.fixtures.dead_letter_dir)
        ctx.built_sinks = (in_use, built)
    return ctx.built_sinks[1]


#: what each connector reads and writes with, as ``dagger validate`` and the start log say it
CONNECTOR_NOTES = {
    "jvm": (
        "Dagger's Kafka reader in the JVM (the records read by the Java client and decoded as they are read; "
        "Dagger's planning: positions, event-time alignment, group commits) and Spark's Kafka sink with Dagger's "
        "encoder: no Python worker on the records' way (SPARK_KAFKA_CONNECTOR=dagger keeps Dagger's reader and "
        "writer in Python workers)"
    ),
    "spark": (
        "Spark's Kafka source and sink, the records decoded and encoded in the JVM: no Python worker on the "
        "records' way (SPARK_KAFKA_CONNECTOR=dagger keeps Dagger's reader and writer)"
    ),
}


def choose_connector(ctx: JobContext, rewritten: str) -> list[str]:
    """Decide what reads the Kafka streams and writes the Kafka sink of a live micro-batch job
    (``SPARK_KAFKA_CONNECTOR``): sets ``ctx.kafka_reader``, ``ctx.spark_kafka`` and ``ctx.connector_note``; returns
    the problems of a job that asks for a connector it cannot have. ``auto`` takes Dagger's reader in the JVM
    where the job allows it, else Dagger's reader and writer. A checkpoint keeps the form of
    offsets it was made with: Dagger's reader's (``dagger`` and ``jvm``: the same planner, the same offsets) or
    Spark's; ``auto`` keeps the very connector of a checkpoint (one made before the choice existed is Dagger's)."""

    config = ctx.config
    asked = config.SPARK_KAFKA_CONNECTOR
    ctx.spark_kafka, ctx.kafka_reader, ctx.connector_note = False, "dagger", None
    if ctx.fixtures is not None or asked == "dagger":
        return []
    if asked == "auto" and not (
        any(ctx.source(s).supports_real_time for s in config.STREAMS)
        and len(config.sink_configs) == 1
        and config.sink_configs[0][1].settings.supports_real_time
    ):
        return []  # no Kafka stream or not one Kafka sink: nothing to choose
    kept = None if ctx.options.validating else _checkpoint_connector(ctx)
    if kept == "dagger" and asked == "auto":
        ctx.connector_note = "Dagger's Kafka reader and writer: the checkpoint was made with them"
        return []
    # Dagger's reader in the JVM takes every job Spark's connector can, event time too: auto asks for Spark's only
    # where the checkpoint was made with it
    reader = ("spark" if kept == "spark" else "jvm") if asked == "auto" else asked
    refused = connector_refusals(
        config, ctx.bounded, reads_event_time(ctx, rewritten), sinks(ctx), ctx.jvm_protobuf,
        protobuf_only=asked == "auto", reader=reader,
    )  # fmt: skip
    if kept is not None and (kept == "spark") != (reader == "spark"):
        made = "Spark's Kafka source" if kept == "spark" else "Dagger's Kafka reader"
        refused.append(f"the checkpoint was made with {made} (its offsets are kept in that reader's form)")
    if not refused:
        ctx.spark_kafka, ctx.kafka_reader, ctx.connector_note = True, reader, CONNECTOR_NOTES[reader]
        return []
    if asked != "auto":
        return [f"SPARK_KAFKA_CONNECTOR={asked}: {why}" for why in refused]
    ctx.connector_note = f"Dagger's Kafka reader and writer ({refused[0]})"
    return []


def _checkpoint_connector(ctx: JobContext) -> str | None:
    """The connector the job's checkpoint was made with: its own record, else ``dagger`` when Spark has started a
    query there already, else None (a new checkpoint)."""
    recorded = ctx.store.read_json("dagger/connector.json")  # dagger, jvm or spark
    if recorded is not None:
        return recorded.get("connector")
    return "dagger" if ctx.store.read_json("metadata") is not None else None


def _python_keeps_daggers_connector(
    ctx: JobContext, df: DataFrame, tables: dict[str, StructType], rewritten: str, problems: list[str]
) -> tuple[DataFrame, dict[str, StructType]]:
    """A query that runs Python (a Python UDF) keeps Python workers anyway: with ``auto`` it is planned again on
    Dagger's reader and writer; with ``spark`` it is a problem."""

    python = python_nodes(df)
    if longbow_schema(df.columns, ctx.config.FLINK_ROWTIME_ATTRIBUTE_NAME) is not None:
        python.append("Longbow")
    if not python:
        return df, tables
    why = f"the query runs Python ({', '.join(python)})"
    if ctx.config.SPARK_KAFKA_CONNECTOR in ("spark", "jvm"):
        problems.append(f"SPARK_KAFKA_CONNECTOR={ctx.config.SPARK_KAFKA_CONNECTOR}: {why}")
        return df, tables
    ctx.spark_kafka, ctx.kafka_reader = False, "dagger"
    ctx.connector_note = f"Dagger's Kafka reader and writer ({why})"
    tables = register_streams(ctx, rewritten)
    return ctx.spark.sql(rewritten), tables


def plan(ctx: JobContext) -> Plan:
    """Everything short of starting the query: streams, SQL, output schema, mode, sink checks."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql.pandas.types import to_arrow_schema

    from dagger.sql.retention import running_aggregates  # start-up: loads sqlglot
    from dagger.sql.rewrite import rewrite_query  # start-up: loads sqlglot
    from dagger.sql.state import unbounded_state  # start-up: loads sqlglot

    config = ctx.config
    rowtime = config.FLINK_ROWTIME_ATTRIBUTE_NAME
    descriptors.check(ctx)
    sinks(ctx)  # each sink resolves the messages it writes
    rewrite = rewrite_query(
        config.sql,
        functions.catalog(ctx).macros,
        declared_schemas(ctx),
        config.FLINK_RETENTION_IDLE_STATE_MINUTE,
        rowtime,
    )
    rewritten = rewrite.sql
    functions.register(ctx, [rewritten, config.model_dump_json()])
    connector_problems = choose_connector(ctx, rewritten) if not ctx.real_time else []
    if not ctx.spark_kafka:  # Dagger's reader and writer: the fork server's imports run while the query is planned
        start_deferred_forkserver()
    tables = register_streams(ctx, rewritten)
    running = None
    try:
        df = ctx.spark.sql(rewritten)
        if ctx.spark_kafka and not ctx.real_time:
            df, tables = _python_keeps_daggers_connector(ctx, df, tables, rewritten, connector_problems)
        if not ctx.bounded:  # a GROUP BY that forgets idle keys, as Dagger's retention
            running = running_aggregates(
                ctx.spark, rewritten, df.columns, config.FLINK_RETENTION_IDLE_STATE_MINUTE, rowtime
            )
            if running:
                df = running[0]
    except (AnalysisException, ParseException) as exc:
        raise SqlError(
            f"FLINK_SQL_QUERY is not valid Spark SQL: {first_line(exc)}\nquery as run: {rewritten}"
        ) from None
    longbow = longbow_schema(df.columns, rowtime)
    if longbow is not None:  # switched on by the output's column names, as in Dagger (before post-processors)
        df = _longbow(ctx, df, longbow)

    df = postprocess(df, functions.processor_context(ctx, "post"))
    result = Plan(config.sql, rewritten, tables, df.schema, dataframe=df, notes=rewrite.notes, longbow=longbow)
    result.connector = ctx.connector_note
    result.problems.extend(connector_problems)
    if running:
        result.notes.append(running[1])
        ctx.processor_settings[STATE_STORE_PROVIDER] = ROCKSDB_STATE_STORE  # transformWithState needs it
    if not ctx.bounded:
        result.unbounded_state = unbounded_state(rewritten, rowtime, retained=running is not None)
    result.output_mode = "batch (bounded input)" if ctx.bounded else _output_mode(ctx, df)
    result.sinks = sinks(ctx)
    if ctx.real_time:
        from dagger.sql.rewrite import reads_event_time  # start-up: loads sqlglot

        master = None if ctx.options.validating else ctx.spark.sparkContext.master
        problems, notes = spark_connector.real_time_checks(
            config, ctx.bounded, ctx.options.available_now, reads_event_time(rewritten), df, ctx.jvm_protobuf, master
        )
        result.problems.extend(problems)
        result.real_time.extend(notes)
        result.output_mode = "update (real-time mode)"
    # VARIANT columns (untyped lookup outputs) take their values' type per batch: checked when written
    arrow_schema = without_variants(to_arrow_schema(df.schema, timezone="UTC"))

    result.problems.extend(sink_problems(result.sinks, arrow_schema))
    return result


def _longbow(ctx: JobContext, df: DataFrame, longbow: LongbowSchema) -> DataFrame:
    """``df`` through the Longbow its columns ask for (classic on Bigtable or in state, writer, reader)."""

    config = ctx.config
    check_types(longbow, df.schema)
    metrics = ctx.counters.longbow = LongbowMetrics.create(ctx.spark, longbow.kind)
    on_state = config.PROCESSOR_LONGBOW_STORE == "state"
    if on_state and (longbow.kind is not LongbowKind.CLASSIC or ctx.bounded):
        raise DaggerConfigError(
            "PROCESSOR_LONGBOW_STORE=state keeps classic Longbow's history in this job's own state: "
            + (
                "a bounded run has none; use bigtable"
                if ctx.bounded
                else f"Longbow type {longbow.kind.label} shares its table between jobs; use bigtable"
            )
        )
    if on_state:
        ctx.processor_settings[STATE_STORE_PROVIDER] = ROCKSDB_STATE_STORE  # transformWithState needs it
        return state_longbow(df, longbow, config, metrics)
    store = ctx.fixtures.longbow_store if ctx.fixtures is not None else None  # dagger test: a file, not Bigtable
    if longbow.kind is LongbowKind.CLASSIC:
        return classic_longbow(df, longbow, config, metrics, store)
    if longbow.kind is LongbowKind.WRITER:
        return plus_writer(df, longbow, config, descriptors.current(ctx), metrics, store)
    return plus_reader(df, longbow, config, metrics, store)


def declared_schemas(ctx: JobContext) -> dict[str, StructType]:
    """Table → the schema its message gives it (before any pre-processor), for the SQL rewrite."""

    rowtime = ctx.config.FLINK_ROWTIME_ATTRIBUTE_NAME
    return {
        s.INPUT_SCHEMA_TABLE: stream_table(s, descriptors.current(ctx), rowtime)
        for s in ctx.config.STREAMS
        if format_of(s).declares_table(s)
    }


def _output_mode(ctx: JobContext, df: DataFrame) -> str:
    """``SPARK_OUTPUT_MODE``, or with ``auto`` append where Spark allows it, else update (Dagger emits every
    update of a non-windowed aggregation). Spark's own check, read through its JVM classes."""
    if ctx.config.SPARK_OUTPUT_MODE != "auto":
        return ctx.config.SPARK_OUTPUT_MODE
    jvm = ctx.spark._jvm
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    analyzed = df._jdf.queryExecution().analyzed()
    try:
        checker.checkForStreaming(analyzed, jvm.org.apache.spark.sql.streaming.OutputMode.Append())
        return "append"
    except Exception:  # noqa: BLE001 - py4j wraps the AnalysisException
        pass
    try:
        checker.checkForStreaming(analyzed, jvm.org.apache.spark.sql.streaming.OutputMode.Update())
        return "update"
    except Exception as exc:  # noqa: BLE001
        raise SqlError(f"Spark cannot run this query as a stream: {first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a JVM exception's ``getMessage``)."""
    text = getattr(exc, "getMessage", lambda: str(exc))() if hasattr(exc, "getMessage") else str(exc)
    return str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__
