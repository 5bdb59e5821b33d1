"""Rewrite Dagger's (Flink's) group-window SQL into Spark SQL, on the sqlglot syntax tree.

==================================================  ==============================================
Dagger / Flink SQL                                   Spark SQL
==================================================  ==============================================
``GROUP BY TUMBLE(rowtime, INTERVAL '30' SECOND)``   ``GROUP BY window(rowtime, '30 seconds')``
``TUMBLE_START(rowtime, INTERVAL '30' SECOND)``      ``window(rowtime, '30 seconds').start``
``TUMBLE_END(rowtime, INTERVAL '30' SECOND)``        ``window(rowtime, '30 seconds').end``
``TUMBLE_ROWTIME(...)``                              ``window_time(window(rowtime, '30 seconds'))``
``HOP(rowtime, slide, size)``                        ``window(rowtime, size, slide)``
``HOP_START`` / ``HOP_END`` / ``HOP_ROWTIME``         as for TUMBLE, with the same argument swap
==================================================  ==============================================

Spark resolves identical ``window(...)`` expressions in SELECT and GROUP BY to one window column, so
``.start``/``.end`` in the select list refer to the grouped window. Everything else is left alone (Spark SQL
accepts backticks and ``INTERVAL '5' MINUTE`` literals as they are). No regular expressions touch the SQL.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dagger.errors import SqlError

_UNITS = {
    "SECOND": "seconds",
    "SECONDS": "seconds",
    "MINUTE": "minutes",
    "MINUTES": "minutes",
    "HOUR": "hours",
    "HOURS": "hours",
    "DAY": "days",
    "DAYS": "days",
    "MILLISECOND": "milliseconds",
    "MILLISECONDS": "milliseconds",
    "WEEK": "weeks",
}
_GROUP_FUNCS = {"TUMBLE", "HOP"}
_AUX = {
    "TUMBLE_START": ("TUMBLE", "start"),
    "TUMBLE_END": ("TUMBLE", "end"),
    "TUMBLE_ROWTIME": ("TUMBLE", "rowtime"),
    "TUMBLE_PROCTIME": ("TUMBLE", "rowtime"),
    "HOP_START": ("HOP", "start"),
    "HOP_END": ("HOP", "end"),
    "HOP_ROWTIME": ("HOP", "rowtime"),
    "HOP_PROCTIME": ("HOP", "rowtime"),
}


def _duration(node: exp.Expression, func: str) -> exp.Literal:
    """``INTERVAL '30' SECOND`` → ``'30 seconds'`` (Spark's window duration string)."""
    if isinstance(node, exp.Interval):
        amount = node.this.name if isinstance(node.this, exp.Literal) else node.this.sql()
        unit = node.args.get("unit")
        unit_name = unit.name.upper() if unit is not None else ""
        if not unit_name:  # INTERVAL '30 SECOND'
            parts = amount.split()
            if len(parts) == 2:
                amount, unit_name = parts[0], parts[1].upper()
        if unit_name in _UNITS:
            return exp.Literal.string(f"{amount} {_UNITS[unit_name]}")
        raise SqlError(
            f"{func}: unsupported interval unit {unit_name or '?'} in {node.sql()}; use SECOND, MINUTE, HOUR or DAY"
        )
    if isinstance(node, exp.Literal) and node.is_string:
        return node
    raise SqlError(f"{func}: expected an INTERVAL literal such as INTERVAL '1' MINUTE, got {node.sql()}")


def _window(func: str, args: list[exp.Expression]) -> exp.Expression:
    """The Spark ``window(time, duration[, slide])`` call for a TUMBLE/HOP argument list."""
    if func == "TUMBLE":
        if len(args) != 2:
            raise SqlError(f"TUMBLE takes (time_attribute, INTERVAL size), got {len(args)} argument(s)")
        return exp.Anonymous(this="window", expressions=[args[0].copy(), _duration(args[1], func)])
    if len(args) != 3:
        raise SqlError(f"HOP takes (time_attribute, INTERVAL slide, INTERVAL size), got {len(args)} argument(s)")
    slide, size = _duration(args[1], func), _duration(args[2], func)
    return exp.Anonymous(this="window", expressions=[args[0].copy(), size, slide])


def _name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    return None


@functools.lru_cache(maxsize=8)
def _known_functions(names: tuple[str, ...]) -> dict[type, str]:
    """sqlglot classes that macro names parse into (``Split`` is sqlglot's ``RegexpSplit`` in Spark SQL)."""
    known = {}
    for name in names:
        try:
            node = sqlglot.parse_one(f"SELECT {name}(a, b)", read="spark").expressions[0]
        except ParseError:
            continue
        if isinstance(node, exp.Func) and not isinstance(node, exp.Anonymous):
            known[type(node)] = name
    return known


def _call(node: exp.Expression, macros: dict) -> tuple[str, list] | None:
    """``(NAME, arguments)`` of a call of one of ``macros``: anonymous, or a function sqlglot knows (``Split``)."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).upper()
        return (name, list(node.expressions)) if name in macros else None
    if isinstance(node, exp.Func):
        name = _known_functions(tuple(sorted(macros))).get(type(node))
        if name is not None:
            args = []
            for key in node.arg_types:
                value = node.args.get(key)
                if isinstance(value, list):
                    args.extend(value)
                elif value is not None:
                    args.append(value)
            return name, args
    return None


def _expand(macro, node: exp.Expression, args: list) -> exp.Expression:  # noqa: ANN001
    try:
        text = macro(args)
    except ValueError as exc:
        raise SqlError(f"{exc} (in {node.sql(dialect='spark')})") from None
    return sqlglot.parse_one(text, read="spark")


def rewrite_sql(sql: str, macros: dict | None = None) -> str:
    """Return ``sql`` with Flink group windows replaced by Spark windows, Flink's ``LATERAL TABLE(f(...))`` by
    Spark's ``LATERAL f(...)``, and calls of ``macros`` (upper-cased name → rewrite) expanded; unchanged when
    there is nothing to rewrite."""
    macros = macros or {}
    try:
        statements = sqlglot.parse(sql, read="spark")
    except ParseError as exc:
        errors = getattr(exc, "errors", None) or [{}]
        first = errors[0]
        where = f" at line {first.get('line')}, column {first.get('col')}" if first.get("line") else ""
        raise SqlError(f"FLINK_SQL_QUERY cannot be parsed{where}: {first.get('description') or exc}") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise SqlError(f"FLINK_SQL_QUERY must hold exactly one query, found {len(statements)} statements")
    tree = statements[0]
    names = {_name(n) for n in tree.find_all(exp.Anonymous)}
    if not names & (_GROUP_FUNCS | set(_AUX) | {"TABLE"}) and not any(
        _call(n, macros) for n in tree.find_all(exp.Func)
    ):
        return sql

    def transform(node: exp.Expression) -> exp.Expression:
        name = _name(node)
        if isinstance(node, exp.Lateral) and _name(node.this) == "TABLE" and len(node.this.expressions) == 1:
            node.set("this", node.this.expressions[0])  # LATERAL TABLE(f(x)) -> LATERAL f(x)
            return node
        if name in _GROUP_FUNCS:
            return _window(name, list(node.expressions))
        if name in _AUX:
            func, part = _AUX[name]
            window = _window(func, list(node.expressions))
            if part == "rowtime":
                return exp.Anonymous(this="window_time", expressions=[window])
            return exp.Dot(this=window, expression=exp.to_identifier(part))
        call = _call(node, macros)
        if call is not None:
            return _expand(macros[call[0]], node, call[1])
        return node

    for _ in range(20):  # a macro's expansion may hold further macro calls (Filters(..., CondEq(...)))
        tree = tree.transform(transform)
        if not any(_call(n, macros) for n in tree.find_all(exp.Func)):
            break
    return tree.sql(dialect="spark")


def referenced_columns(sql: str) -> set[str] | None:
    """Every name the query mentions, lower-cased (columns, struct fields, aliases), or ``None`` when it may
    read every column: it selects ``*`` / ``t.*`` / ``struct(*)`` (``COUNT(*)`` reads none) or cannot be parsed.
    A superset of the columns the query reads, which is what pruning and compatibility checks need."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except ParseError:
        return None
    if any(not isinstance(star.parent, exp.Count) for star in tree.find_all(exp.Star)):
        return None
    return {identifier.name.lower() for identifier in tree.find_all(exp.Identifier)}
