"""Flink SQL built-in functions that Spark SQL lacks or names differently, as Spark expressions.

Only functions whose Flink form would fail or mean something else in Spark are listed; every other Flink
function a Dagger query uses (``CHAR_LENGTH``, ``CONCAT_WS``, ``POSITION``, ``REGEXP_EXTRACT``, ``TIMESTAMPADD``,
``TIMESTAMPDIFF``, ``UNIX_TIMESTAMP``, ``FROM_UNIXTIME``, ``MD5``, ``UUID``, ``IF``, ``COALESCE`` …) exists in
Spark SQL under the same name with the same meaning, and datetime patterns are translated by
:mod:`dagger.sql.datetime_patterns`. :func:`markdown_table` renders the list for the docs.

Functions whose names Spark shares but whose defaults differ keep Spark's meaning (a Spark user's query must
not change under them): ``STR_TO_MAP(s)`` splits on ``,`` and ``:`` in Spark (Flink: ``,`` and ``=``); write the
delimiters, ``STR_TO_MAP(s, ',', '=')``, to get Flink's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from dagger.errors import SqlError


@dataclass(frozen=True)
class FlinkFunction:
    """One Flink function and the Spark expression that computes it."""

    flink: str  # the call as Flink documents it
    spark: str | Callable[[list[exp.Expression]], str]  # template: {0}, {1}… are the arguments' places
    arity: tuple[int, int]
    defaults: tuple[str, ...] = ()  # SQL of the optional trailing arguments, when left out

    def expand(self, name: str, args: list[exp.Expression]) -> exp.Expression:
        low, high = self.arity
        if not low <= len(args) <= high:
            counts = str(low) if low == high else f"{low} to {high}"
            raise SqlError(f"{name} takes {counts} argument(s) ({self.flink}), got {len(args)}")
        given = list(args) + [sqlglot.parse_one(d, read="spark") for d in self.defaults[len(args) - low :]]
        template = self.spark(given) if callable(self.spark) else self.spark
        return substitute(template, given)


def substitute(template: str, args: list[exp.Expression]) -> exp.Expression:
    """Parse ``template`` with each ``{i}`` standing for ``args[i]`` (the argument's tree, not its text, so that
    nothing in it is parsed twice)."""
    placeholders = [f"__dagger_arg_{i}" for i in range(len(args))]
    tree = sqlglot.parse_one(template.format(*placeholders), read="spark")

    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name in placeholders:
            arg = args[placeholders.index(node.name)].copy()
            simple = isinstance(arg, (exp.Column, exp.Literal, exp.Func, exp.Paren))
            return arg if simple else exp.Paren(this=arg)
        return node

    return tree.transform(put)


def _timestamp_ltz(args: list[exp.Expression]) -> str:
    precision = args[1]
    if not isinstance(precision, exp.Literal) or precision.name not in ("0", "3"):
        raise SqlError(
            f"TO_TIMESTAMP_LTZ: precision must be the literal 0 (seconds) or 3 (milliseconds), got {precision.sql()}"
        )
    return "timestamp_seconds({0})" if precision.name == "0" else "timestamp_millis({0})"


_DIGITS = "'^[0-9]+$'"
FLINK_FUNCTIONS: dict[str, FlinkFunction] = {
    "SPLIT_INDEX": FlinkFunction(
        "SPLIT_INDEX(string, delimiter, index)",
        # split() takes a regex: quote the delimiter; the index is 0-based, NULL when out of range
        "CASE WHEN {2} >= 0 THEN try_element_at(split({0}, concat('\\\\Q', {1}, '\\\\E'), -1), {2} + 1) END",
        (3, 3),
    ),
    "FROM_BASE64": FlinkFunction("FROM_BASE64(string)", "CAST(unbase64({0}) AS STRING)", (1, 1)),
    "TO_BASE64": FlinkFunction("TO_BASE64(string)", "base64({0})", (1, 1)),
    "SHA224": FlinkFunction("SHA224(string)", "sha2({0}, 224)", (1, 1)),
    "SHA256": FlinkFunction("SHA256(string)", "sha2({0}, 256)", (1, 1)),
    "SHA384": FlinkFunction("SHA384(string)", "sha2({0}, 384)", (1, 1)),
    "SHA512": FlinkFunction("SHA512(string)", "sha2({0}, 512)", (1, 1)),
    "IS_DIGIT": FlinkFunction("IS_DIGIT(string)", f"coalesce({{0}} RLIKE {_DIGITS}, false)", (1, 1)),
    "IS_ALPHA": FlinkFunction("IS_ALPHA(string)", "coalesce({0} RLIKE '^\\\\p{{L}}+$', false)", (1, 1)),
    "IS_DECIMAL": FlinkFunction(
        "IS_DECIMAL(string)", "coalesce(try_cast({0} AS DOUBLE) IS NOT NULL AND {0} RLIKE '[0-9]', false)", (1, 1)
    ),
    "CONVERT_TZ": FlinkFunction(
        "CONVERT_TZ(string, from_zone, to_zone)",
        "date_format(convert_timezone({1}, {2}, to_timestamp_ntz({0})), 'yyyy-MM-dd HH:mm:ss')",
        (3, 3),
    ),
    "PROCTIME": FlinkFunction("PROCTIME()", "current_timestamp()", (0, 0)),
    "CURRENT_ROW_TIMESTAMP": FlinkFunction("CURRENT_ROW_TIMESTAMP()", "current_timestamp()", (0, 0)),
    "TRUNCATE": FlinkFunction(
        "TRUNCATE(numeric[, digits])",
        "CASE WHEN {0} >= 0 THEN floor({0}, {1}) ELSE ceil({0}, {1}) END",
        (1, 2),
        defaults=("0",),
    ),
    "TO_TIMESTAMP_LTZ": FlinkFunction("TO_TIMESTAMP_LTZ(numeric, precision)", _timestamp_ltz, (2, 2)),
    "RAND_INTEGER": FlinkFunction(
        "RAND_INTEGER([seed, ]bound)",
        lambda a: "CAST(floor(rand() * {0}) AS INT)" if len(a) == 1 else "CAST(floor(rand({0}) * {1}) AS INT)",
        (1, 2),
    ),
    "ELEMENT": FlinkFunction(
        "ELEMENT(array)",
        "CASE size({0}) WHEN 0 THEN NULL WHEN 1 THEN {0}[0] "
        "ELSE raise_error('ELEMENT: the array has more than one element') END",
        (1, 1),
    ),
}


def markdown_table() -> str:
    """The mapping as a Markdown table (for docs/sql.md)."""
    lines = ["| Flink SQL | Spark SQL it runs as |", "|---|---|"]
    for name, function in sorted(FLINK_FUNCTIONS.items()):
        if callable(function.spark):
            args = [exp.column(f"x{i}") for i in range(function.arity[1])]
            if name == "TO_TIMESTAMP_LTZ":
                args = [exp.column("x0"), exp.Literal.number(3)]
            spark = function.expand(name, args).sql(dialect="spark")
        else:
            spark = function.spark.format(*[f"x{i}" for i in range(function.arity[1])])
        lines.append(f"| `{function.flink}` | `{spark.replace('|', chr(92) + '|')}` |")
    return "\n".join(lines)
