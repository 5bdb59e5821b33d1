"""A ``GROUP BY`` without a window whose keys are forgotten after ``FLINK_RETENTION_IDLE_STATE_MINUTE`` idle
minutes, as Dagger (Flink's idle-state retention) forgets them.

Spark keeps the state of a plain streaming aggregation for every key forever and has no retention for it. Its
``transformWithState`` operator has one: a value state with a TTL, counted in processing time from the last
write, which is what Flink's retention counts. So a query of the form ::

    SELECT <keys and expressions of aggregates> FROM ... [WHERE ...] GROUP BY <keys> [HAVING ...]

with the aggregates ``COUNT``, ``SUM``, ``AVG``, ``MIN`` and ``MAX`` runs in three steps: the query without its
aggregation (:attr:`Grouping.inner`: the keys and the aggregates' arguments per row, with the query's ``FROM``,
joins and ``WHERE``), a running aggregate per key kept with that TTL (:class:`RunningAggregates`, emitting a key's
new result whenever rows of it arrive, as Spark's update mode and Dagger's retract stream do), and the select list
and ``HAVING`` over those results (:attr:`Grouping.outer`). A key idle for longer than the retention starts again
from its next row, as in Dagger. Other shapes (``DISTINCT`` aggregates, other aggregate functions, ``GROUPING
SETS``, a ``GROUP BY`` inside a subquery) keep Spark's unbounded state and are named by ``dagger validate``
(:mod:`dagger.sql.state`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dagger.sql.parsed import parsed
from dagger.sql.state import grouping_is_bounded

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
KEY, ARG, RESULT = "__dagger_key", "__dagger_arg", "__dagger_agg"


@dataclass
class Grouping:
    """A ``GROUP BY`` query split around its aggregation (see the module)."""

    inner: str  #: per row: the keys (``__dagger_key<j>``) and the aggregates' arguments (``__dagger_arg<i>``)
    outer: str  #: the select list and HAVING over the view of keys and results (``__dagger_agg<i>``)
    keys: list[str] = field(default_factory=list)  #: the GROUP BY keys as written, for the notes
    aggregates: list[tuple[str, str | None]] = field(default_factory=list)  #: (function, argument column or None)


def split_grouping(sql: str, names: list[str], view: str, rowtime: str = "rowtime") -> Grouping | None:
    """``sql`` split around its top-level aggregation, or None when it is not of the supported form.

    ``names`` are the query's output column names as Spark gives them (the split keeps them); the outer query
    reads the running results from ``view``."""
    tree = parsed(sql)  # shared: read only (the inner query is a copy)
    if not isinstance(tree, exp.Select):
        return None
    group = tree.args.get("group")
    if group is None or not group.expressions or grouping_is_bounded(group.expressions, rowtime):
        return None
    if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")):
        return None
    if tree.args.get("distinct") is not None or any(tree.args.get(k) for k in ("order", "limit", "offset")):
        return None
    if list(tree.find_all(exp.Window)) or len(tree.expressions) != len(names):
        return None
    aliases = {e.alias: e.this for e in tree.expressions if isinstance(e, exp.Alias)}
    keys = []
    for key in group.expressions:
        if isinstance(key, exp.Literal):  # GROUP BY 1: by position
            return None
        if isinstance(key, exp.Column) and not key.table and key.name in aliases:
            key = aliases[key.name]  # GROUP BY a select alias
        keys.append(key)
    key_sql = {k.sql(dialect="spark"): f"{KEY}{j}" for j, k in enumerate(keys)}
    aggregates: list[tuple[str, str | None]] = []
    arguments: list[exp.Expression] = []
    found: dict[str, str] = {}  # aggregate sql -> result column

    def replace(node: exp.Expression) -> exp.Expression:
        text = node.sql(dialect="spark")
        if text in key_sql:
            return exp.column(key_sql[text])
        if isinstance(node, exp.AggFunc):
            kind = _AGGREGATES.get(type(node))
            if kind is None or isinstance(node.this, exp.Distinct) or node.args.get("expressions"):
                raise _Unsupported
            if text not in found:
                found[text] = f"{RESULT}{len(aggregates)}"
                arg = node.this
                if kind == "count" and (
                    isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not arg.is_string)
                ):
                    aggregates.append((kind, None))  # COUNT(*), COUNT(1): rows
                else:
                    aggregates.append((kind, f"{ARG}{len(arguments)}"))
                    arguments.append(arg)
            return exp.column(found[text])
        return node

    try:
        outer_columns = []
        for expression, name in zip(tree.expressions, names, strict=True):
            body = expression.this if isinstance(expression, exp.Alias) else expression
            outer_columns.append(exp.alias_(body.copy().transform(replace), name, quoted=True))
        having = tree.args.get("having")
        outer_having = having.this.copy().transform(replace) if having is not None else None
    except _Unsupported:
        return None
    ours = set(key_sql.values()) | set(found.values())
    for part in [*outer_columns, outer_having]:  # anything else is a column outside the keys and aggregates
        if part is not None and any(c.name not in ours or c.table for c in part.find_all(exp.Column)):
            return None
    inner = tree.copy()
    inner.set("group", None)
    inner.set("having", None)
    inner.set(
        "expressions",
        [exp.alias_(k.copy(), f"{KEY}{j}") for j, k in enumerate(keys)]
        + [exp.alias_(a.copy(), f"{ARG}{i}") for i, a in enumerate(arguments)],
    )
    outer = exp.select(*outer_columns).from_(exp.to_table(view))
    if outer_having is not None:
        outer = outer.where(outer_having)
    return Grouping(
        inner=inner.sql(dialect="spark"),
        outer=outer.sql(dialect="spark"),
        keys=[k.sql(dialect="spark") for k in group.expressions],
        aggregates=aggregates,
    )


class _Unsupported(Exception):
    """An aggregate the running form does not compute (the query keeps Spark's own aggregation)."""


def running_aggregates(
    spark: SparkSession, sql: str, names: list[str], minutes: float, rowtime: str
) -> tuple[DataFrame, str] | None:
    """The streaming DataFrame of ``sql`` (whose output columns Spark names ``names``) with keys forgotten after
    ``minutes`` idle, and a note saying so; None when the query is not of the supported form (or an argument's
    type is not one the running form sums)."""
    from pyspark.sql import types as T

    if minutes <= 0:
        return None
    view = f"__dagger_running_{abs(hash(sql)) % 10**8}"
    grouping = split_grouping(sql, names, view, rowtime)
    if grouping is None:
        return None
    inner = spark.sql(grouping.inner)
    types = {f.name: f.dataType for f in inner.schema.fields}
    numeric = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType)
    orderable = (*numeric, T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)
    results = []
    for i, (kind, arg) in enumerate(grouping.aggregates):
        arg_type = types.get(arg) if arg else None
        if kind in ("sum", "avg") and not isinstance(arg_type, numeric):
            return None
        if kind in ("min", "max") and not isinstance(arg_type, orderable):
            return None
        if kind == "count":
            result = T.LongType()
        elif kind == "avg":
            result = T.DoubleType()
        elif kind == "sum":
            result = T.DoubleType() if isinstance(arg_type, (T.FloatType, T.DoubleType)) else T.LongType()
        else:
            result = arg_type
        results.append(T.StructField(f"{RESULT}{i}", result, True))
    keys = [f for f in inner.schema.fields if f.name.startswith(KEY)]
    output = T.StructType([*keys, *results])
    processor = RunningAggregates(
        grouping.aggregates, inner.columns, [f.name for f in keys], output.json(), int(minutes * 60_000)
    )
    aggregated = inner.groupBy(*[f.name for f in keys]).transformWithStateInPandas(
        statefulProcessor=processor, outputStructType=output, outputMode="Update", timeMode="ProcessingTime"
    )
    aggregated.createOrReplaceTempView(view)
    df = spark.sql(grouping.outer)
    note = (
        f"GROUP BY {', '.join(grouping.keys)} forgets a key after FLINK_RETENTION_IDLE_STATE_MINUTE={minutes:g} "
        "idle minutes, as Dagger does (its running aggregates are kept in a state with that TTL; the key's next "
        "row starts them again)"
    )
    return df, note


def _processor_base() -> type:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class RunningAggregates(_processor_base()):  # type: ignore[misc]
    """Per key: the running ``COUNT``/``SUM``/``AVG``/``MIN``/``MAX`` of its rows, in one value state with a TTL
    (renewed by every update); emits the key's results once per micro-batch that has rows of it."""

    def __init__(
        self,
        aggregates: list[tuple[str, str | None]],
        columns: list[str],
        keys: list[str],
        output_json: str,
        ttl_ms: int,
    ):
        self.aggregates = aggregates
        self.columns = columns
        self.keys = keys
        self.output_json = output_json
        self.ttl_ms = ttl_ms

    def init(self, handle: Any) -> None:
        from pyspark.sql import types as T

        output = T.StructType.fromJson(json.loads(self.output_json))
        fields = []
        for i, (kind, _) in enumerate(self.aggregates):
            result = output[f"{RESULT}{i}"].dataType
            if kind in ("sum", "avg"):
                total = T.DoubleType() if kind == "avg" else result
                fields += [T.StructField(f"s{i}", total), T.StructField(f"c{i}", T.LongType())]
            elif kind == "count":
                fields.append(T.StructField(f"c{i}", T.LongType()))
            else:
                fields.append(T.StructField(f"m{i}", result))
        self.names = [f.name for f in fields]
        self.state = handle.getValueState("aggregates", T.StructType(fields), self.ttl_ms)

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - Spark's API
        import pandas as pd

        frame = pd.concat(list(rows), ignore_index=True)
        frame.columns = self.columns  # Spark names them by position (_0, _1, ...)
        before = self.state.get() if self.state.exists() else None
        acc = dict(zip(self.names, before, strict=True)) if before is not None else dict.fromkeys(self.names)
        out: dict[str, list[Any]] = {name: [value] for name, value in zip(self.keys, key, strict=True)}
        for i, (kind, arg) in enumerate(self.aggregates):
            column = frame[arg].dropna() if arg else None
            if kind == "count":
                acc[f"c{i}"] = (acc[f"c{i}"] or 0) + (len(frame) if column is None else len(column))
                value = acc[f"c{i}"]
            elif kind in ("sum", "avg"):
                if len(column):
                    total = column.sum().item()
                    acc[f"s{i}"] = total if acc[f"s{i}"] is None else acc[f"s{i}"] + total
                    acc[f"c{i}"] = (acc[f"c{i}"] or 0) + len(column)
                count = acc[f"c{i}"] or 0
                value = acc[f"s{i}"] if kind == "sum" else (acc[f"s{i}"] / count if count else None)
            else:
                if len(column):
                    best = column.min() if kind == "min" else column.max()
                    best = best.item() if hasattr(best, "item") and not isinstance(best, pd.Timestamp) else best
                    old = acc[f"m{i}"]
                    if old is None or (best < old if kind == "min" else best > old):
                        acc[f"m{i}"] = best
                value = acc[f"m{i}"]
            out[f"{RESULT}{i}"] = [value]
        self.state.update(tuple(acc[n] for n in self.names))
        yield pd.DataFrame(out)

    def close(self) -> None:
        return None
