"""Joins without an equality condition, made acceptable to Spark's stream-stream join.

Flink joins two streams on a time interval alone (Dagger's own inner-join example:
``… JOIN data_stream_1 ON data_stream_1.rowtime BETWEEN data_stream_0.rowtime AND data_stream_0.rowtime +
INTERVAL '5' MINUTE``). Spark's stream-stream join needs at least one equality between the two sides
(``Stream-stream join without equality predicate is not supported``), so both sides get a constant key column
and the condition gains ``left.key = right.key``::

    FROM (SELECT *, 0 AS __dagger_join_key_data_stream_0 FROM data_stream_0) AS data_stream_0
    JOIN (SELECT *, 0 AS __dagger_join_key_data_stream_1 FROM data_stream_1) AS data_stream_1
      ON data_stream_0.__dagger_join_key_data_stream_0 = data_stream_1.__dagger_join_key_data_stream_1 AND (…)

The result is the same rows; the price is that every row of the join has the same key, so the join (and its
state) runs in one partition, one task. ``dagger validate`` says so for each such join. ``SELECT *`` over the join
leaves the key columns out (``* EXCEPT (…)``).
"""

from __future__ import annotations

from sqlglot import exp

KEY_PREFIX = "__dagger_join_key_"


def add_join_keys(tree: exp.Expression) -> list[str]:
    """Give every join of ``tree`` that has no equality between its sides a constant key; returns notes."""
    notes = []
    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        from_ = select.args.get("from_")
        if from_ is None or not joins:
            continue
        seen = [from_.this]
        keyed: dict[str, str] = {}  # alias -> key column of the sources wrapped so far
        for join in joins:
            right = join.this
            on = join.args.get("on")
            if on is None or join.args.get("using") or isinstance(right, exp.Unnest) or join.kind == "CROSS":
                seen.append(right)
                continue
            left_aliases = {_alias(s) for s in seen}
            right_alias = _alias(right)
            if _has_equality(on, left_aliases, right_alias):
                seen.append(right)
                continue
            left_alias = _left_side(on, left_aliases) or _alias(from_.this)
            left_source = next(s for s in seen if _alias(s) == left_alias)
            for source, alias in ((left_source, left_alias), (right, right_alias)):
                if alias not in keyed:
                    keyed[alias] = KEY_PREFIX + _safe(alias)
                    wrapped = _wrap(source, alias, keyed[alias])
                    if source is from_.this:
                        from_.set("this", wrapped)
                        seen[0] = wrapped
                    elif source is right:
                        join.set("this", wrapped)
                    else:
                        source.replace(wrapped)
                        seen[seen.index(source)] = wrapped
                    if source is right:
                        right = wrapped
            equality = exp.EQ(
                this=exp.column(keyed[left_alias], table=left_alias),
                expression=exp.column(keyed[right_alias], table=right_alias),
            )
            join.set("on", exp.and_(equality, exp.Paren(this=on)))
            seen.append(right)
            notes.append(
                f"JOIN of {left_alias} and {right_alias} has no equality condition, which Spark's stream-stream join "
                f"needs: both sides get a constant key ({keyed[left_alias]} = {keyed[right_alias]}), so this join "
                "and its state run in one partition (one task); add an equality on a shared column to spread it"
            )
        if keyed:
            _hide_keys(select, keyed)
    return notes


def _alias(source: exp.Expression) -> str:
    return source.alias_or_name


def _safe(alias: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in alias)


def _tables(node: exp.Expression) -> set[str | None]:
    """The qualifiers of the columns in ``node`` (``None`` for an unqualified column)."""
    return {c.table or None for c in node.find_all(exp.Column)}


def _has_equality(on: exp.Expression, left: set[str], right: str) -> bool:
    """True when some top-level conjunct of ``on`` equates an expression of the left side with one of the right
    (an unqualified column could be either side: such an equality is given the benefit of the doubt)."""
    for conjunct in on.flatten() if isinstance(on, exp.And) else [on]:
        conjunct = conjunct.unnest()
        if not isinstance(conjunct, exp.EQ):
            continue
        a, b = _tables(conjunct.this), _tables(conjunct.expression)
        if not a or not b:
            continue
        if None in a or None in b:
            return True
        if (a <= left and b == {right}) or (b <= left and a == {right}):
            return True
    return False


def _left_side(on: exp.Expression, left: set[str]) -> str | None:
    """The left source the condition refers to (the first one named)."""
    for column in on.find_all(exp.Column):
        if column.table in left:
            return column.table
    return None


def _wrap(source: exp.Expression, alias: str, key: str) -> exp.Expression:
    """``(SELECT *, 0 AS key FROM source) AS alias``."""
    inner = source.copy()
    if isinstance(inner, exp.Table):
        inner.set("alias", None)
        query = exp.select("*", exp.alias_(exp.Literal.number(0), key)).from_(inner)
    else:  # a sub-query: its own select list gains the key
        query = exp.select("*", exp.alias_(exp.Literal.number(0), key)).from_(inner)
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _hide_keys(select: exp.Select, keyed: dict[str, str]) -> None:
    """``*`` and ``t.*`` in the select list leave the key columns out."""
    for expression in select.expressions:
        if isinstance(expression, exp.Star):
            expression.set("except_", [exp.column(k) for k in keyed.values()])
        elif isinstance(expression, exp.Column) and isinstance(expression.this, exp.Star):
            key = keyed.get(expression.table)
            if key is not None:
                expression.this.set("except_", [exp.column(key)])
