"""Flink's group windows (Dagger's ``TUMBLE``/``HOP``/``SESSION``) as Spark's window functions.

=====================================================  ===============================================
Dagger / Flink SQL                                      Spark SQL
=====================================================  ===============================================
``GROUP BY TUMBLE(rowtime, INTERVAL '30' SECOND)``      ``GROUP BY window(rowtime, '30 seconds')``
``TUMBLE_START(rowtime, INTERVAL '30' SECOND)``         ``window(rowtime, '30 seconds').start``
``TUMBLE_END(rowtime, INTERVAL '30' SECOND)``           ``window(rowtime, '30 seconds').end``
``TUMBLE_ROWTIME(...)``                                 ``window_time(window(rowtime, '30 seconds'))``
``HOP(rowtime, slide, size)``                           ``window(rowtime, size, slide)``
``HOP_START`` / ``HOP_END`` / ``HOP_ROWTIME``            as for TUMBLE, with the same argument swap
``SESSION(rowtime, INTERVAL '10' MINUTE)``              ``session_window(rowtime, '10 minutes')``
``SESSION_START`` / ``SESSION_END`` / ``SESSION_ROWTIME``  ``session_window(...).start`` / ``.end`` / ``window_time``
=====================================================  ===============================================

Spark resolves identical window expressions in SELECT and GROUP BY to one window column, so ``.start``/``.end``
in the select list refer to the grouped window. ``TUMBLE_ROWTIME`` (the window's last instant, a time attribute)
lets an outer query window the result again, as in Flink.
"""

from __future__ import annotations

from sqlglot import exp

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

#: the SQL rewrite renames ``SESSION(`` to this before parsing (sqlglot's Spark parser cannot read the keyword)
SESSION_PLACEHOLDER = "__FLINK_FORM_SESSION"
GROUP_FUNCTIONS = {"TUMBLE", "HOP", SESSION_PLACEHOLDER}
AUXILIARY = {
    f"{kind}_{part}": (kind if kind != "SESSION" else SESSION_PLACEHOLDER, value)
    for kind in ("TUMBLE", "HOP", "SESSION")
    for part, value in (("START", "start"), ("END", "end"), ("ROWTIME", "rowtime"), ("PROCTIME", "rowtime"))
}
_DISPLAY = {SESSION_PLACEHOLDER: "SESSION"}


def duration(node: exp.Expression, func: str) -> exp.Literal:
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


def window(func: str, args: list[exp.Expression]) -> exp.Expression:
    """The Spark window call for a ``TUMBLE``/``HOP``/``SESSION`` argument list."""
    shown = _DISPLAY.get(func, func)
    if func == "TUMBLE" or func == SESSION_PLACEHOLDER:
        if len(args) != 2:
            what = "size" if func == "TUMBLE" else "gap"
            raise SqlError(f"{shown} takes (time_attribute, INTERVAL {what}), got {len(args)} argument(s)")
        name = "window" if func == "TUMBLE" else "session_window"
        return exp.Anonymous(this=name, expressions=[args[0].copy(), duration(args[1], shown)])
    if len(args) != 3:
        raise SqlError(f"HOP takes (time_attribute, INTERVAL slide, INTERVAL size), got {len(args)} argument(s)")
    slide, size = duration(args[1], shown), duration(args[2], shown)
    return exp.Anonymous(this="window", expressions=[args[0].copy(), size, slide])


def rewrite_window(name: str, node: exp.Expression) -> exp.Expression | None:
    """The Spark form of a group-window call ``name(...)``, or ``None`` when ``name`` is not one."""
    if name in GROUP_FUNCTIONS:
        return window(name, list(node.expressions))
    if name in AUXILIARY:
        func, part = AUXILIARY[name]
        spark_window = window(func, list(node.expressions))
        if part == "rowtime":
            return exp.Anonymous(this="window_time", expressions=[spark_window])
        return exp.Dot(this=spark_window, expression=exp.to_identifier(part))
    return None


_ROWTIME = {name for name, (_, part) in AUXILIARY.items() if part == "rowtime"}


def lift_rowtimes(tree: exp.Expression) -> tuple[exp.Expression, list[str]]:
    """``TUMBLE_ROWTIME(...) AS rowtime`` as Spark needs it; returns the tree (its root may be replaced) and notes.

    Spark's ``window_time`` (the window's last instant, an event-time column a later window can group on) reads
    the ``window`` column an aggregation outputs, so it must be applied above the aggregation: the query selects
    the window itself and an outer projection turns it into the time attribute::

        SELECT k, count(1) AS n, TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rowtime FROM t GROUP BY ...
        →  SELECT k, n, window_time(__dagger_window_rowtime) AS rowtime
           FROM (SELECT k, count(1) AS n, window(rowtime, '1 minutes') AS __dagger_window_rowtime FROM t GROUP BY ...)
    """
    notes = []
    for select in list(tree.find_all(exp.Select)):
        items = list(select.expressions)
        lifted = {}
        for i, item in enumerate(items):
            call = item.this if isinstance(item, exp.Alias) else item
            name = _anonymous_name(call)
            if name in _ROWTIME:
                alias = item.alias if isinstance(item, exp.Alias) else name.lower()
                lifted[i] = alias
                group, _ = AUXILIARY[name]
                window_call = exp.Anonymous(this=group, expressions=[a.copy() for a in call.expressions])
                items[i] = exp.alias_(window_call, f"__dagger_window_{alias}")
        select.set("expressions", items)
        nested = [n for item in items for n in item.find_all(exp.Anonymous) if _anonymous_name(n) in _ROWTIME]
        if nested:
            raise SqlError(
                f"{nested[0].sql(dialect='spark')}: a *_ROWTIME call must be a select item of its own "
                "(… AS rowtime); use it in an outer query"
            )
        if not lifted:
            continue
        names = [_output_name(item) for item in items]
        inner = select.copy()
        if all(names):
            columns = [
                exp.alias_(exp.Anonymous(this="window_time", expressions=[exp.column(names[i])]), lifted[i])
                if i in lifted
                else exp.column(names[i])
                for i in range(len(items))
            ]
        else:  # an unnamed expression: keep its generated name, the time attributes come last
            hidden = [exp.column(f"__dagger_window_{a}") for a in lifted.values()]
            columns = [exp.Star(except_=hidden)] + [
                exp.alias_(exp.Anonymous(this="window_time", expressions=[exp.column(f"__dagger_window_{a}")]), a)
                for a in lifted.values()
            ]
        outer = exp.select(*columns).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this="__dagger_windowed")))
        if select is tree:
            tree = outer
        else:
            select.replace(outer)
        notes += [
            f"{a}: the window's time attribute (window_time) is computed above the aggregation" for a in lifted.values()
        ]
    return tree, notes


def _anonymous_name(node: exp.Expression) -> str | None:
    return str(node.this).upper() if isinstance(node, exp.Anonymous) else None


def _output_name(item: exp.Expression) -> str | None:
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return item.name
    return None
