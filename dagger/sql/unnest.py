"""Flink's ``UNNEST`` joins as Spark's ``LATERAL VIEW`` generators.

=================================================================  ==============================================
Dagger / Flink SQL                                                  Spark SQL
=================================================================  ==============================================
``FROM t, UNNEST(t.items) AS items (id, quantity, name)``            ``FROM t LATERAL VIEW INLINE(t.items) items AS id, quantity, name``
``FROM t CROSS JOIN UNNEST(t.tags) AS tag (name)``                  ``FROM t LATERAL VIEW EXPLODE(t.tags) tag AS name``
``FROM t, UNNEST(t.metadata) AS m (`key`, `value`)``                ``FROM t LATERAL VIEW EXPLODE(t.metadata) m AS `key`, `value```
``FROM t LEFT JOIN UNNEST(t.items) AS i (...) ON TRUE``             ``FROM t LATERAL VIEW OUTER INLINE(t.items) i AS ...``
=================================================================  ==============================================

An array of messages becomes one column per field (``INLINE``), an array of scalars one column (``EXPLODE``),
and a map two columns, key and value (Dagger reads maps as arrays of key/value rows, so its queries unnest them
the same way). Which generator fits depends on the column's type, looked up in the input tables' schemas; a
column whose type cannot be looked up (a sub-query's) is taken as an array of rows when it names two or more
columns, other than exactly ``key`` and ``value``.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dagger.errors import SqlError
from dagger.sql.columns import column_type


def rewrite_unnests(tree: exp.Expression, schemas: dict[str, Any]) -> list[str]:
    """Replace every ``UNNEST`` join of ``tree`` in place; returns one note per rewrite."""
    notes = []
    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        kept = []
        for join in joins:
            unnest = join.this
            if not isinstance(unnest, exp.Unnest):
                kept.append(join)
                continue
            lateral, note = _lateral(select, join, unnest, schemas)
            select.append("laterals", lateral)
            notes.append(note)
        if len(kept) != len(joins):
            select.set("joins", kept or None)
    return notes


def _lateral(select: exp.Select, join: exp.Join, unnest: exp.Unnest, schemas: dict[str, Any]) -> tuple[Any, str]:
    shown = _as_written(unnest)
    if len(unnest.expressions) != 1:
        raise SqlError(f"{shown}: UNNEST of several arrays at once is not supported; unnest them one at a time")
    if unnest.args.get("offset"):
        raise SqlError(
            f"{shown}: UNNEST ... WITH ORDINALITY is not supported; use Spark's "
            "LATERAL VIEW POSEXPLODE(array) alias AS position, value (positions start at 0)"
        )
    on = join.args.get("on")
    outer = join.side == "LEFT"
    if on is not None and not (isinstance(on, exp.Boolean) and on.this is True):
        raise SqlError(f"JOIN {shown} ON {on.sql()}: an UNNEST join takes ON TRUE only; filter in WHERE instead")
    alias = unnest.args.get("alias")
    name = alias.this if alias is not None and alias.this is not None else exp.to_identifier("unnested")
    columns = list(alias.columns) if alias is not None else []
    value = unnest.expressions[0]
    kind = _kind(select, value, schemas)
    if kind is None:
        names = [c.name.lower() for c in columns]
        kind = "array" if len(columns) <= 1 else "map" if names == ["key", "value"] else "array_of_rows"
    generator = exp.Inline(this=value.copy()) if kind == "array_of_rows" else exp.Explode(this=value.copy())
    lateral = exp.Lateral(
        this=generator,
        view=True,
        outer=outer,
        alias=exp.TableAlias(this=name.copy(), columns=[c.copy() for c in columns] or None),
    )
    note = f"{'LEFT JOIN ' if outer else ''}{shown} → {lateral.sql(dialect='spark')} ({kind.replace('_', ' ')})"
    return lateral, note


def _as_written(unnest: exp.Unnest) -> str:
    """``UNNEST(t.items) AS items (id, name)`` (sqlglot prints its Spark form, ``EXPLODE(...)``)."""
    values = ", ".join(e.sql(dialect="spark") for e in unnest.expressions)
    alias = unnest.args.get("alias")
    if alias is None:
        return f"UNNEST({values})"
    columns = ", ".join(c.sql(dialect="spark") for c in alias.columns)
    return f"UNNEST({values}) AS {alias.this.sql(dialect='spark') if alias.this else ''}" + (
        f" ({columns})" if columns else ""
    )


def _kind(select: exp.Select, value: exp.Expression, schemas: dict[str, Any]) -> str | None:
    """``map``, ``array_of_rows`` or ``array`` for a column of one of the select's tables, else ``None``."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not isinstance(value, exp.Column):
        return None
    data_type = column_type(select, [p.name for p in value.parts], schemas)
    if isinstance(data_type, MapType):
        return "map"
    if isinstance(data_type, ArrayType):
        return "array_of_rows" if isinstance(data_type.elementType, StructType) else "array"
    return None
