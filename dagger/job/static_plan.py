"""``dagger validate`` without Spark: the plan of a job whose output can be read from its config and its SQL alone.

Starting Spark's session takes ~3 of the ~4.6 s a ``dagger validate`` of a one-stream job took, and users run it on
every edit. For the common job (Kafka or JSON streams, a SQL of projections, filters, casts, arithmetic, built-in
functions and windowed or plain aggregations, sinks) the plan comes from the descriptors and sqlglot instead: the
input tables from the messages, the SQL rewritten as for Spark (:mod:`dagger.sql.rewrite`), its columns resolved
and typed against those tables (sqlglot's ``qualify`` and ``annotate_types`` with Spark's rules), the output mode
from its shape, and each sink's check of the typed output.

It only ever says yes: anything it cannot be sure of (a column it cannot resolve, a type it cannot name, a join, a
subquery, a function of the job's library, processors, Longbow, real-time mode, a bounded run) returns ``None``
with the reason, and ``dagger validate`` asks Spark, whose analysis words every error as a run would. ``dagger
validate --full`` always asks Spark. Runs on the driver, with no JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagger.job.descriptors as descriptors
import dagger.job.plan as planning
from dagger.catalog import sink_problems
from dagger.formats.table import stream_table
from dagger.functions import build_catalog
from dagger.job.plan import Plan
from dagger.longbow.schema import longbow_schema
from dagger.plugins.source import SourceEnv, SourceOptions
from dagger.serde.variant import without_variants

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from dagger.job.context import JobContext
    from dagger.job.plan import Plan

#: query shapes Spark's streaming analysis has rules for that this module does not model
_NEEDS_SPARK = {
    "Join": "a join",
    "Subquery": "a subquery",
    "Union": "a set operation",
    "Intersect": "a set operation",
    "Except": "a set operation",
    "Window": "an OVER window",
    "Order": "ORDER BY",
    "Limit": "LIMIT",
    "Distinct": "DISTINCT",
    "Lateral": "a lateral view",
    "Unnest": "UNNEST",
    "Explode": "explode",
    "Posexplode": "explode",
    "Inline": "inline",
    "With": "a WITH clause",
}


def plan_without_spark(ctx: JobContext) -> tuple[Plan | None, str]:
    """``(plan, "")``, or ``(None, why Spark's analysis is needed)``."""
    config = ctx.config
    if config.SPARK_TRIGGER_MODE == "real-time":
        return None, "real-time mode"
    if ctx.bounded:
        return None, "a bounded run"
    if config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_POSTPROCESSOR_ENABLE:
        return None, "pre- or post-processors"
    if config.PYTHON_UDF_ENABLE:
        return None, "Python UDFs"
    from dagger.sql.rewrite import rewrite_query  # start-up: loads sqlglot

    descriptors.check(ctx)
    sinks = planning.sinks(ctx)

    options = SourceOptions(commit_offsets=ctx.commits_offsets, hold_file=ctx.hold_file)
    for stream in config.STREAMS:  # what building its reader checks: client settings, TLS stores, positions
        ctx.source(stream).check_reading(stream, SourceEnv(None, config, descriptors.current(ctx), options))
    catalog = build_catalog(config)
    used = sorted(catalog.needed([config.sql]))
    if used:
        return None, f"the function library ({', '.join(used)})"
    rowtime = config.FLINK_ROWTIME_ATTRIBUTE_NAME
    rewrite = rewrite_query(
        config.sql, catalog.macros, planning.declared_schemas(ctx), config.FLINK_RETENTION_IDLE_STATE_MINUTE, rowtime
    )
    tables = {s.INPUT_SCHEMA_TABLE: stream_table(s, descriptors.current(ctx), rowtime) for s in config.STREAMS}
    output, why, tree = _output(rewrite.sql, tables)
    if output is None:
        return None, why
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField(name, data_type, True) for name, data_type in output])

    if longbow_schema(schema.names, rowtime) is not None:
        return None, "Longbow"
    mode, why = _output_mode(config, tree, rewrite.sql, schema.names, rowtime)
    if mode is None:
        return None, why
    from pyspark.sql.pandas.types import to_arrow_schema

    from dagger.sql.state import unbounded_state  # start-up: loads sqlglot

    result = Plan(config.sql, rewrite.sql, tables, schema, output_mode=mode, notes=rewrite.notes)
    result.unbounded_state = unbounded_state(rewrite.sql, rowtime)
    result.sinks = sinks
    arrow_schema = without_variants(to_arrow_schema(schema, timezone="UTC"))
    result.problems.extend(sink_problems(sinks, arrow_schema))
    return result, ""


def _output(sql: str, tables: dict[str, Any]) -> tuple[list[tuple[str, DataType]] | None, str, Any]:
    """The SQL's output columns with their Spark types and its resolved tree, or ``(None, why, None)``."""
    from sqlglot import exp, parse_one
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    schema = {table: {f.name: f.dataType.simpleString() for f in struct.fields} for table, struct in tables.items()}
    try:
        tree = parse_one(_named_windows(sql), dialect="spark")
        for node in tree.walk():
            shape = _NEEDS_SPARK.get(type(node).__name__)
            if shape is not None:
                return None, shape, None
            if isinstance(node, exp.Select) and node.args.get("distinct"):
                return None, "DISTINCT", None
        typed = annotate_types(qualify(tree, schema=schema, dialect="spark"), schema=schema, dialect="spark")
    except SqlglotError as exc:  # Spark words the error as a run would
        return None, f"sqlglot could not resolve it ({str(exc).splitlines()[0]})", None
    out = []
    for column in typed.selects:
        spark_type = _window_bound(column) or _spark_type(column.type)
        if spark_type is None:
            return None, f"the type of output column {column.alias_or_name} ({column.sql(dialect='spark')})", None
        out.append((column.alias_or_name, spark_type))
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        return None, "repeated output column names", None
    return out, "", typed


#: what ``WINDOW(...)`` calls are named while sqlglot reads the query (it takes ``WINDOW`` for a window clause)
WINDOW_CALL = "__DAGGER_WINDOW"


def _named_windows(sql: str) -> str:
    """``sql`` with each call of Spark's ``WINDOW(time, duration)`` renamed :data:`WINDOW_CALL`."""
    from sqlglot.dialects.spark import Spark
    from sqlglot.tokens import TokenType

    tokens = Spark().tokenize(sql)
    out, at = [], 0
    for token, after in zip(tokens, tokens[1:], strict=False):
        if token.token_type == TokenType.WINDOW and after.token_type == TokenType.L_PAREN:
            out += [sql[at : token.start], WINDOW_CALL]
            at = token.end + 1
    return "".join(out) + sql[at:]


def _window_bound(column: Any) -> DataType | None:
    """``WINDOW(...).start`` / ``.end``: a timestamp (Spark's window is a struct of two); else None."""
    from pyspark.sql.types import TimestampType
    from sqlglot import exp

    node = column.unalias()
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Anonymous) and node.this.name == WINDOW_CALL:
        return TimestampType() if node.name.lower() in ("start", "end") else None
    return None


def _spark_type(data_type: Any) -> DataType | None:
    """sqlglot's type as Spark's; None for one it cannot name exactly (unknown, decimal, interval ...)."""
    from pyspark.sql import types as T
    from sqlglot import exp

    if data_type is None:
        return None
    kind = data_type.this
    kinds = exp.DataType.Type
    scalars = {
        kinds.BOOLEAN: T.BooleanType,
        kinds.TINYINT: T.ByteType,
        kinds.SMALLINT: T.ShortType,
        kinds.INT: T.IntegerType,
        kinds.BIGINT: T.LongType,
        kinds.FLOAT: T.FloatType,
        kinds.DOUBLE: T.DoubleType,
        kinds.TEXT: T.StringType,
        kinds.VARCHAR: T.StringType,
        kinds.CHAR: T.StringType,
        kinds.BINARY: T.BinaryType,
        kinds.VARBINARY: T.BinaryType,
        kinds.DATE: T.DateType,
        kinds.TIMESTAMP: T.TimestampType,
        kinds.TIMESTAMPLTZ: T.TimestampType,
        kinds.TIMESTAMPTZ: T.TimestampType,  # Spark's TIMESTAMP (with the session time zone)
        kinds.TIMESTAMPNTZ: T.TimestampNTZType,
    }
    if kind in scalars:
        return scalars[kind]()
    inner = data_type.expressions
    if kind == kinds.ARRAY and len(inner) == 1:
        element = _spark_type(inner[0])
        return T.ArrayType(element, True) if element is not None else None
    if kind == kinds.MAP and len(inner) == 2:
        key, value = _spark_type(inner[0]), _spark_type(inner[1])
        return T.MapType(key, value, True) if key is not None and value is not None else None
    if kind == kinds.STRUCT and inner:
        fields = []
        for field in inner:
            if not isinstance(field, exp.ColumnDef) or field.args.get("kind") is None:
                return None
            field_type = _spark_type(field.args["kind"])
            if field_type is None:
                return None
            fields.append(T.StructField(field.name, field_type, True))
        return T.StructType(fields)
    return None


def _output_mode(config: Any, tree: Any, sql: str, names: list[str], rowtime: str) -> tuple[str | None, str]:
    """``SPARK_OUTPUT_MODE``, or with ``auto`` what Spark's streaming check picks for the query's shape: append
    without aggregation or with one grouped by an event-time window, update for any other aggregation."""
    from sqlglot import exp

    grouped = bool(tree.args.get("group")) or any(tree.find_all(exp.AggFunc))
    if grouped and config.FLINK_RETENTION_IDLE_STATE_MINUTE and config.FLINK_RETENTION_IDLE_STATE_MINUTE > 0:
        from dagger.sql.retention import split_grouping  # start-up: loads sqlglot

        if split_grouping(sql, names, "__dagger_static", rowtime) is not None:
            return None, "idle-key retention of a running aggregation"
    if config.SPARK_OUTPUT_MODE != "auto":
        return config.SPARK_OUTPUT_MODE, ""
    if not grouped:
        return "append", ""
    group = tree.args.get("group")
    keys = group.expressions if group is not None else []
    windowed = any(
        isinstance(key, exp.Anonymous)
        and key.name == WINDOW_CALL
        and isinstance(key.expressions[0], exp.Column)
        and key.expressions[0].name == rowtime
        for key in keys
    )
    return ("append" if windowed else "update"), ""
