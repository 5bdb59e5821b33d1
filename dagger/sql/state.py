"""Which parts of a query keep state for every key forever, and the joins bounded as Dagger bounds them.

Spark drops the state of windows and of joins bounded in event time once the watermark passes them. A ``GROUP
BY`` without a window, a ``SELECT DISTINCT`` and a join without a time bound keep one entry per key for as long as
the job runs: a job over an unbounded key space (order numbers, customers) grows its state, its checkpoint and its
micro-batch time without end. Dagger (Flink) drops a key's state after ``FLINK_RETENTION_IDLE_STATE_MINUTE`` idle
minutes (10 by default). For a join between two streams that is close to an event-time bound — Flink's state
TTL counts from a row's write, so a row joins what arrives within that long — and :func:`bound_joins` adds one:
``a.rowtime BETWEEN b.rowtime - INTERVAL 'n' MINUTE AND b.rowtime + INTERVAL 'n' MINUTE``, which lets the
watermark drop old rows. A top-level ``GROUP BY`` of the common form keeps its running aggregates in a state with
that TTL (:mod:`dagger.sql.retention`). Spark has no retention for the other operators, so ``dagger validate`` and
the job's start-up log name each one and how to bound it (:func:`unbounded_state`).
"""

from __future__ import annotations

from sqlglot import exp

from dagger.sql.parsed import parsed

_WINDOWS = {"window", "session_window", "window_time"}


def unbounded_state(sql: str, rowtime: str = "rowtime", retained: bool = False) -> list[str]:
    """One sentence per operator of ``sql`` (as Spark runs it) whose state grows with its keys forever;
    ``retained``: the top-level GROUP BY forgets idle keys (:mod:`dagger.sql.retention`)."""
    tree = parsed(sql)
    if tree is None:
        return []
    out = []
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        if retained and select is tree:
            group = None
        if group is not None and not grouping_is_bounded(group.expressions, rowtime):
            keys = ", ".join(e.sql(dialect="spark") for e in group.expressions)
            out.append(
                f"GROUP BY {keys} keeps a running result for every key forever (no window): group by a TUMBLE "
                "or HOP window as well to have the watermark drop old keys"
            )
        if select.args.get("distinct") is not None and group is None:
            out.append(
                "SELECT DISTINCT keeps every distinct row forever: add a window (or deduplicate within one) to bound it"
            )
        for join in select.args.get("joins") or []:
            if isinstance(join.this, exp.Unnest) or join.args.get("kind") == "CROSS":
                continue
            on = join.args.get("on")
            if on is None or not _time_bounded(on, rowtime):
                other = join.this.alias_or_name
                out.append(
                    f"the join with {other} keeps every row of both sides forever (no time bound): add a condition "
                    f"such as `a.{rowtime} BETWEEN b.{rowtime} - INTERVAL '10' MINUTE AND b.{rowtime} + INTERVAL "
                    "'10' MINUTE` so the watermark drops old rows"
                )
    return out


def bound_joins(tree: exp.Expression, minutes: float, streams: set[str], rowtime: str = "rowtime") -> list[str]:
    """Give every join of two input streams (``streams``, by table name) that has no time bound the bound Dagger's
    idle-state retention of ``minutes`` comes to; returns notes (none when ``minutes`` is 0)."""
    if minutes <= 0:
        return []
    notes = []
    for select in list(tree.find_all(exp.Select)):
        from_ = select.args.get("from_")
        left = from_.this if from_ is not None else None
        if not _stream(left, streams):
            continue
        for join in select.args.get("joins") or []:
            right, on = join.this, join.args.get("on")
            if on is None or not _stream(right, streams) or _time_bounded(on, rowtime):
                continue
            a, b = left.alias_or_name, right.alias_or_name
            ours = exp.Between(
                this=exp.column(rowtime, table=a),
                low=exp.Sub(this=exp.column(rowtime, table=b), expression=_minutes(minutes)),
                high=exp.Add(this=exp.column(rowtime, table=b), expression=_minutes(minutes)),
            )
            join.set("on", exp.and_(exp.Paren(this=on), ours))
            notes.append(
                f"JOIN of {a} and {b} has no time bound: rows join within {minutes:g} minutes of each other in event "
                f"time ({ours.sql(dialect='spark')}), as Dagger drops join state after FLINK_RETENTION_IDLE_STATE_MINUTE"
                f"={minutes:g}; the watermark then drops old rows (0 keeps every row forever)"
            )
    return notes


def _stream(node: exp.Expression | None, streams: set[str]) -> bool:
    return isinstance(node, exp.Table) and node.name in streams


def _minutes(n: float) -> exp.Interval:
    if n == int(n):
        return exp.Interval(this=exp.Literal.string(str(int(n))), unit=exp.var("MINUTE"))
    return exp.Interval(this=exp.Literal.string(f"{n * 60:g}"), unit=exp.var("SECOND"))


def grouping_is_bounded(keys: list[exp.Expression], rowtime: str) -> bool:
    """Whether a GROUP BY with ``keys`` has its state dropped by the watermark (a key moves with event time)."""
    return any(_bounded(e, rowtime) for e in keys)


def _bounded(expression: exp.Expression, rowtime: str) -> bool:
    """A grouping key that moves with event time: a window, or the rowtime itself."""
    for node in expression.walk():
        if isinstance(node, exp.Func) and node.sql_name().lower() in _WINDOWS:
            return True
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _WINDOWS:
            return True
        if isinstance(node, exp.Column) and node.name.lower() == rowtime.lower():
            return True
    return False


def _time_bounded(on: exp.Expression, rowtime: str) -> bool:
    """Whether a join condition bounds the two sides' rowtimes against each other (a comparison or BETWEEN that
    reads rowtime on both sides)."""
    for node in on.find_all(exp.Between, exp.GT, exp.GTE, exp.LT, exp.LTE):
        tables = {c.table for c in node.find_all(exp.Column) if c.name.lower() == rowtime.lower()}
        if len(tables) >= 2:
            return True
    return False


def retention_note(minutes: float) -> str:
    """What Dagger would have done with such state, for the messages above."""
    return (
        f"Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE={minutes:g} idle minutes; Spark has no "
        "such retention for these operators and keeps it"
    )
