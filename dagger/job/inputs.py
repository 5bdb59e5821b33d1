"""A job's input tables: each stream's source → invalid rows (counted, dropped or dead-lettered) → watermark →
event-time barrier → pre-processors → a temporary view named ``INPUT_SCHEMA_TABLE``. Runs on the driver.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dagger.formats.table import stream_table
from dagger.job.descriptors import current
from dagger.job.functions import processor_context
from dagger.plugins.format import format_of
from dagger.plugins.source import SourceEnv, SourceOptions
from dagger.processors import check_preprocessor_tables, filters_invalid_records, preprocess, table_transformers
from dagger.serde.types import VALIDITY_COLUMN
from dagger.session.pandas_free import lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from dagger.job.context import JobContext

log = logging.getLogger("dagger")


def register_streams(ctx: JobContext, sql: str | None = None) -> dict[str, StructType]:
    """Create, clean, watermark and register every stream; returns table → schema (all its columns).

    With the query ``sql`` (as run), Kafka streams decode only the fields it can read.
    """
    from pyspark.sql import functions as F

    spark, config, options = ctx.spark, ctx.config, ctx.options
    event_time = reads_event_time(ctx, sql)
    source_options = SourceOptions(
        commit_offsets=ctx.commits_offsets,
        bounded=ctx.bounded,
        from_ms=options.from_ms,
        to_ms=options.to_ms,
        fields=pruned_fields(ctx, sql),
        event_time=event_time,
        hold_file=ctx.hold_file,
        spark_kafka=ctx.spark_kafka,
        jvm_reader=ctx.kafka_reader == "jvm",
        real_time=ctx.real_time,
        jvm_protobuf=ctx.jvm_protobuf,
        resolve_offsets=not options.validating,
    )
    delay = f"{config.FLINK_WATERMARK_DELAY_MS} milliseconds"
    rowtime = config.FLINK_ROWTIME_ATTRIBUTE_NAME
    check_preprocessor_tables(config)
    tables = {}
    for stream in config.STREAMS:
        table = stream.INPUT_SCHEMA_TABLE
        source = ctx.source(stream)
        # Dagger's InvalidRecordFilterTransformer receives undecodable records instead of the source failing
        filtered_later = filters_invalid_records(config, table)
        if filtered_later:
            stream = source.passing_invalid_records(stream)
        df = source.build(stream, SourceEnv(spark, config, current(ctx), source_options))
        tables[table] = df.schema
        if table in source_options.fields:
            tables[table] = stream_table(stream, current(ctx), rowtime)
        invalid = F.count(F.when(~F.col(VALIDITY_COLUMN), 1)).alias("count")
        if ctx.bounded:  # a batch query reports through Observation objects
            from pyspark.sql import Observation

            observation = Observation(f"input_{table}")
            ctx.counters.input_observations[table] = observation
            df = df.observe(observation, F.count(lit(1)).alias("rows"), invalid)
            ctx.counters.inputs.append(source.input_description(spark, stream, options.from_ms, options.to_ms))
        if source.invalid_record_policy(stream) in ("drop", "dead-letter") and not filtered_later:
            if not ctx.bounded:
                df = df.observe(f"invalid_records_{table}", invalid)
            df = df.where(F.col(VALIDITY_COLUMN))
        df = df.withWatermark(rowtime, delay)
        if event_time and not ctx.bounded:
            df = _event_time_barrier(df, table, rowtime)
        df = preprocess(df, table, processor_context(ctx, "pre", table))
        df.createOrReplaceTempView(table)
    return tables


def _event_time_barrier(df: DataFrame, table: str, rowtime: str) -> DataFrame:
    """Every record of the stream advances event time, as in Flink, whatever the query keeps.

    Spark's optimizer moves a ``WHERE`` that does not read ``rowtime`` below the watermark, so only the rows the
    query keeps would advance it (a filtered stream's last windows never close). It moves filters through
    projections, not through ``observe``, so the observed metrics right above the watermark hold every filter
    above them, for plain SQL, pre-processors and joins alike. They count the stream's rows and its latest event
    time (``events_<table>`` in the query progress).
    """
    from pyspark.sql import functions as F

    return df.observe(f"events_{table}", F.count(lit(1)).alias("rows"), F.max(F.col(rowtime)).alias("max_event_time"))


def reads_event_time(ctx: JobContext, sql: str | None) -> bool:
    """Whether anything the job runs depends on the watermark (so Kafka partitions are read aligned in event time):
    its SQL groups, aggregates, joins or deduplicates, or it has transformers (their own SQL or state). A job that
    only filters and projects never drops a record as late and reads by offsets, without waiting."""
    from dagger.sql.rewrite import reads_event_time as sql_reads_event_time  # start-up: loads sqlglot

    if sql is None or sql_reads_event_time(sql):
        return True
    config = ctx.config
    post = config.PROCESSOR_POSTPROCESSOR_CONFIG if config.PROCESSOR_POSTPROCESSOR_ENABLE else None
    pre = config.PROCESSOR_PREPROCESSOR_CONFIG if config.PROCESSOR_PREPROCESSOR_ENABLE else None
    return bool((post and post.transformers) or (pre and pre.table_transformers))


def pruned_fields(ctx: JobContext, sql: str | None) -> dict[str, list[str]]:
    """Table → the fields its Kafka reader decodes, for the tables that need fewer than all."""
    from dagger.sql.rewrite import referenced_columns  # start-up: loads sqlglot

    if sql is None or not ctx.config.SPARK_PRUNE_INPUT_COLUMNS:
        return {}
    used = referenced_columns(sql)
    pruned = {}
    for stream in ctx.config.STREAMS:
        table = stream.INPUT_SCHEMA_TABLE
        records = format_of(stream)
        if (
            not ctx.source(stream).decodes_named_fields
            or not records.prunes_fields
            or table_transformers(ctx.config, table)
        ):
            continue  # pre-processors may read any column; JSON records are read whole
        fields = records.pruned_fields(stream, current(ctx), used)
        if fields is not None:
            pruned[table] = fields
            total = len(records.record_struct(stream, current(ctx)).fields)
            log.info("stream '%s' decodes %d of %d fields: %s", table, len(fields), total, ", ".join(fields))
    return pruned
