"""Dagger's view of a protobuf ``Timestamp`` in SQL: a row of ``seconds`` and ``nanos``.

Dagger (Flink) types a ``google.protobuf.Timestamp`` field as ``ROW<seconds BIGINT, nanos INT>``, so its users'
SQL reads ``event_timestamp.seconds``; here the column is a Spark ``TIMESTAMP`` (microseconds), and such an access
becomes the same number computed from it:

* ``x.seconds`` → ``CAST(FLOOR(UNIX_MICROS(x) / 1000000) AS BIGINT)`` (whole seconds since the epoch, rounded
  down as protobuf's are, before 1970 too);
* ``x.nanos`` → ``CAST(PMOD(UNIX_MICROS(x), 1000000) * 1000 AS INT)`` (always 0 to 999,999,000: Spark keeps
  microseconds).

Only fields the input schemas type as ``TIMESTAMP`` are rewritten, at any depth (``pickup.time.seconds``); a
select item keeps the name Flink gives it (``seconds``), unless it has an alias.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dagger.sql.columns import column_type

_PARTS = {"seconds", "nanos"}


def rewrite_timestamp_fields(tree: exp.Expression, schemas: dict[str, Any]) -> list[str]:
    """Rewrite every ``<timestamp>.seconds`` / ``.nanos`` of ``tree`` in place; returns a note per distinct form."""
    from pyspark.sql.types import TimestampNTZType, TimestampType

    notes: list[str] = []
    for column in list(tree.find_all(exp.Column)):
        parts = [p.name for p in column.parts]
        if len(parts) < 2 or parts[-1].lower() not in _PARTS:
            continue
        select = column.find_ancestor(exp.Select)
        if select is None:
            continue
        if not isinstance(column_type(select, parts[:-1], schemas), TimestampType | TimestampNTZType):
            continue
        field = parts[-1].lower()
        value = exp.column(parts[-2], table=parts[-3] if len(parts) > 2 else None) if len(parts) <= 3 else None
        if value is None:  # a deeper path: a.b.c.seconds
            value = exp.Dot.build([exp.to_identifier(p) for p in parts[:-1]])
        micros = exp.Anonymous(this="UNIX_MICROS", expressions=[value])
        if field == "seconds":
            number = exp.Div(this=micros, expression=exp.Literal.number(1_000_000))
            replacement = exp.cast(exp.Floor(this=number), "BIGINT")
        else:
            remainder = exp.Anonymous(this="PMOD", expressions=[micros, exp.Literal.number(1_000_000)])
            replacement = exp.cast(exp.Mul(this=remainder, expression=exp.Literal.number(1000)), "INT")
        if isinstance(column.parent, exp.Select) and column.arg_key == "expressions":
            replacement = exp.alias_(replacement, field)
        written = column.sql(dialect="spark")
        column.replace(replacement)
        note = f"{written} → {replacement.sql(dialect='spark')} (a protobuf Timestamp is a TIMESTAMP here)"
        if note not in notes:
            notes.append(note)
    return notes
