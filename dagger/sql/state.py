"""Which parts of a query keep state for every key forever.

Spark drops the state of windows and of joins bounded in event time once the watermark passes them. A ``GROUP
BY`` without a window, a ``SELECT DISTINCT`` and a join without a time bound keep one entry per key for as long as
the job runs: a job over an unbounded key space (order numbers, customers) grows its state, its checkpoint and its
micro-batch time without end. Dagger (Flink) drops a key's state after ``FLINK_RETENTION_IDLE_STATE_MINUTE`` idle
minutes (10 by default); Spark has no retention for these operators, so ``dagger validate`` and the job's start-up
log name each one and how to bound it.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

_WINDOWS = {"window", "session_window", "window_time"}


def unbounded_state(sql: str, rowtime: str = "rowtime") -> list[str]:
    """One sentence per operator of ``sql`` (as Spark runs it) whose state grows with its keys forever."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except ParseError:
        return []
    out = []
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        if group is not None and not any(_bounded(e, rowtime) for e in group.expressions):
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


def retention_note(minutes: int) -> str:
    """What Dagger would have done with such state, for the messages above."""
    return (
        f"Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE={minutes} idle minutes; Spark has no "
        "such retention and keeps it"
    )
