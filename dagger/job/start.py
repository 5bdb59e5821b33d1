"""Starting a planned job: a streaming query writing every micro-batch to every sink through the ``dagger-sink``
writer (or Spark's own Kafka sink in real-time mode and on Spark's connector), or, for bounded input, one batch query. The session is tuned
for the job (:mod:`dagger.session.tuning`) and the sinks are given their counters and state directories first.
Runs on the driver.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import dagger.job.descriptors as descriptors
from dagger.bounded import BoundedRun, batch_id_for, fingerprint, record_run
from dagger.config.ignored import ignored_keys_set
from dagger.errors import DaggerConfigError
from dagger.kafka.spark_connector import stateful
from dagger.longbow.bigtable import ensure_table
from dagger.longbow.classic import table_name
from dagger.longbow.schema import LongbowKind, duration_ms
from dagger.plugins.sink import COUNTERS
from dagger.session.spark import start_deferred_forkserver, use_data_source
from dagger.session.tuning import tune
from dagger.sinks.spark_writer import SINK_FORMAT, SinkDataSource, encode_sinks, write_micro_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from dagger.bounded import BoundedRun
    from dagger.job.context import JobContext
    from dagger.job.plan import Plan
    from dagger.plugins.sink import Sink

log = logging.getLogger("dagger")


def start(ctx: JobContext, plan: Plan) -> StreamingQuery | BoundedRun:
    """Start ``plan``'s query (streaming, real-time or bounded) and return it."""
    from dagger.sql.state import retention_note  # start-up: loads sqlglot

    config = ctx.config
    if plan.problems:
        connector = any(p.startswith("SPARK_KAFKA_CONNECTOR=") for p in plan.problems)
        what = "the job cannot run" if ctx.real_time or connector else "the SQL output does not fit the sink"
        raise DaggerConfigError(f"{what}:\n  - " + "\n  - ".join(plan.problems))
    tune(ctx.spark, config, ctx.store.local, ctx.processor_settings)
    for note in plan.notes:
        log.info("SQL rewrite: %s", note)
    for note in plan.unbounded_state:
        log.warning("state without bound: %s (%s)", note, retention_note(config.FLINK_RETENTION_IDLE_STATE_MINUTE))
    for key, reason in ignored_keys_set(config):
        log.warning("%s is accepted and ignored: %s", key, reason)
    on_bigtable = config.PROCESSOR_LONGBOW_STORE == "bigtable"
    tested = ctx.fixtures is not None  # dagger test: no Bigtable, no destinations
    if plan.longbow is not None and plan.longbow.kind is not LongbowKind.READER and on_bigtable and not tested:
        _ensure_longbow_table(ctx)
    if config.sink_type_note:
        log.warning("%s", config.sink_type_note)
    if not ctx.spark_kafka:  # Dagger's writer and reader run Python workers (a query in the JVM alone none)
        start_deferred_forkserver()
    if ctx.bounded:
        return _start_bounded(ctx, plan)
    descriptors.pin(ctx, plan.tables, plan.rewritten_sql)
    if ctx.fixtures is None:  # the next run keeps the connector: the two keep offsets differently
        ctx.store.write_json("dagger/connector.json", {"connector": ctx.kafka_reader})
    if ctx.real_time:
        return _start_real_time(ctx, plan)
    if ctx.spark_kafka:
        return _start_spark_kafka(ctx, plan)
    return _start_micro_batches(ctx, plan)


def _start_real_time(ctx: JobContext, plan: Plan) -> StreamingQuery:
    config = ctx.config
    log.info(
        "starting %r in real-time mode: %d stream(s) by Spark's Kafka source -> %s, checkpoint every %d ms, %s",
        config.FLINK_JOB_ID,
        len(plan.tables),
        "; ".join(s.describe() for s in plan.sinks),
        config.realtime_checkpoint_ms,
        ctx.checkpoint,
    )
    ctx.counters.progress_sinks = [s.display_name for s in plan.sinks]
    prepare_sinks(ctx, plan.sinks)  # a schema to auto-register is registered now: its id goes in each record
    return plan.sinks[0].start_spark_query(plan.dataframe, config, ctx.checkpoint, config.job_slug)


def _start_spark_kafka(ctx: JobContext, plan: Plan) -> StreamingQuery:
    """Micro-batches on Spark's Kafka source and sink (``SPARK_KAFKA_CONNECTOR``), the records decoded and encoded
    in the JVM."""

    config = ctx.config
    if ctx.options.available_now:
        trigger: dict[str, Any] = {"availableNow": True}
    else:
        trigger = {"processingTime": f"{config.trigger_interval_ms} milliseconds"}
    # Spark logs a batch's progress beside the next one where it can: a stateless query, not available-now
    async_progress = not ctx.options.available_now and not stateful(plan.dataframe)
    log.info(
        "starting %r in micro-batches on %s: %d stream(s) by %s -> %s by Spark's Kafka sink, "
        "checkpoint %s, descriptors sha256 %s",
        config.FLINK_JOB_ID,
        plan.dataframe.sparkSession.sparkContext.master,
        len(plan.tables),
        "Dagger's Kafka reader in the JVM" if ctx.kafka_reader == "jvm" else "Spark's Kafka source",
        "; ".join(s.describe() for s in plan.sinks),
        ctx.checkpoint,
        descriptors.current(ctx).sha256[:12],
    )
    log.info("Kafka connector: %s", ctx.connector_note)
    ctx.counters.progress_sinks = [s.display_name for s in plan.sinks]
    prepare_sinks(ctx, plan.sinks)  # a schema to auto-register is registered now: its id goes in each record
    sink = plan.sinks[0]
    return sink.start_spark_query(
        plan.dataframe, config, ctx.checkpoint, config.job_slug, trigger, async_progress, plan.output_mode
    )


def _start_micro_batches(ctx: JobContext, plan: Plan) -> StreamingQuery:
    config = ctx.config
    prepare_sinks(ctx, plan.sinks)
    encoded = encode_sinks(plan.sinks)
    writer = (
        with_sink_columns(plan.dataframe, plan.sinks)
        .writeStream.option("checkpointLocation", ctx.checkpoint)
        .outputMode(plan.output_mode)
    )
    writer = writer.queryName(config.job_slug)
    use_data_source(ctx.spark, SinkDataSource)  # the writer, and foreachBatch's batch writer
    if plan.output_mode == "append":
        writer = writer.format(SINK_FORMAT).option("sinks", encoded)
    else:  # Python streaming writers are append-only; update/complete go through foreachBatch
        writer = writer.foreachBatch(write_micro_batch(encoded))
    if ctx.options.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{config.trigger_interval_ms} milliseconds")
        if config.trigger_interval_ms != config.SPARK_TRIGGER_INTERVAL_MS:
            log.info(
                "a micro-batch every %d ms (FLINK_CHECKPOINT_INTERVAL_MS: Dagger writes to %s at each checkpoint)",
                config.trigger_interval_ms,
                " and ".join(sorted({c.SINK_TYPE for _, c in config.sink_configs})),
            )
    if ctx.connector_note is not None:
        log.info("Kafka connector: %s", ctx.connector_note)
    log.info(
        "starting %r on master %s: %d stream(s) -> %s, output mode %s, checkpoint %s, descriptors sha256 %s",
        config.FLINK_JOB_ID,
        plan.dataframe.sparkSession.sparkContext.master,
        len(plan.tables),
        "; ".join(s.describe() for s in plan.sinks),
        plan.output_mode,
        ctx.checkpoint,
        descriptors.current(ctx).sha256[:12],
    )
    return writer.start()


def _start_bounded(ctx: JobContext, plan: Plan) -> BoundedRun:
    """Run the SQL once over the bounded input and write the result to every sink as one batch."""

    config, counters = ctx.config, ctx.counters
    prepare_sinks(ctx, plan.sinks)
    print_ = fingerprint(counters.inputs)
    batch_id = batch_id_for(ctx.store, print_)
    write = write_micro_batch(encode_sinks(plan.sinks))
    use_data_source(ctx.spark, SinkDataSource)

    def work() -> dict[str, Any]:
        write(with_sink_columns(plan.dataframe, plan.sinks), batch_id)
        record_run(ctx.store, print_, batch_id)
        rows, observed = {}, {}
        for table, observation in counters.input_observations.items():
            values = observation.get
            rows[table] = values.get("rows", 0)
            observed[f"invalid_records_{table}"] = {"count": values.get("count", 0)}
        for name, observation in counters.processor_observations.items():
            observed[name] = dict(observation.get)
        return {"rows": rows, "observed": observed}

    log.info(
        "starting %r on master %s: %d bounded stream(s) -> %s, one batch query (batch %d of %s), descriptors sha256 %s",
        config.FLINK_JOB_ID,
        ctx.spark.sparkContext.master,
        len(plan.tables),
        "; ".join(s.describe() for s in plan.sinks),
        batch_id,
        ctx.checkpoint,
        descriptors.current(ctx).sha256[:12],
    )
    for sink in plan.sinks:
        log.info("sink %s: a re-run over input already written %s", sink.display_name, sink.rerun)
    return BoundedRun(ctx.spark, config.job_slug, batch_id, work).start()


def with_sink_columns(df: DataFrame, sinks: list[Sink]) -> DataFrame:
    """``df`` with the columns the JVM computes for the sinks (:meth:`~dagger.plugins.sink.Sink.jvm_columns`)."""
    extra = {}
    for sink in sinks:
        extra.update(sink.jvm_columns(df.schema))
    return df.withColumns(extra) if extra else df


def prepare_sinks(ctx: JobContext, sinks: list[Sink]) -> None:
    """Give each sink its counters and state directory, and let it set up its destination."""

    context = ctx.spark.sparkContext
    ctx.counters.sinks = {}
    for sink in sinks:
        counters = {kind: context.accumulator(0) for kind in COUNTERS}
        sink.attach(counters, ctx.store.below(f"sinks/{sink.display_name}"))
        ctx.counters.sinks[sink.display_name] = counters
        sink.first_contact_s = ctx.config.SPARK_FIRST_CONTACT_TIMEOUT_MS / 1000
        if not ctx.sinks_reached:  # the runner asked them already, while the session started
            sink.reach()
        sink.prepare()  # a test's sinks (captured) contact nothing


def _ensure_longbow_table(ctx: JobContext) -> None:
    """Create Longbow's Bigtable table with Dagger's GC rule unless it exists (a failure stops the job)."""

    config = ctx.config
    name = table_name(config)
    max_age = duration_ms(config.PROCESSOR_LONGBOW_DOCUMENT_DURATION, "PROCESSOR_LONGBOW_DOCUMENT_DURATION")
    if ensure_table(name, max_age, config.PROCESSOR_LONGBOW_ASYNC_TIMEOUT / 1000):
        log.info(
            "Longbow: created Bigtable table %s (one version per cell, kept %s)",
            name.path,
            config.PROCESSOR_LONGBOW_DOCUMENT_DURATION,
        )
    else:
        log.info("Longbow: history in Bigtable table %s", name.path)
