"""Dagger's (Flink's) SQL as Spark SQL: one pass over the sqlglot syntax tree per difference.

=====================================  ===============================================================
Flink form                             module (and what it becomes)
=====================================  ===============================================================
``TUMBLE``/``HOP``/``SESSION`` groups  :mod:`dagger.sql.windows` (``window``, ``session_window``)
``UNNEST(...) AS t (a, b)`` joins      :mod:`dagger.sql.unnest` (``LATERAL VIEW INLINE/EXPLODE``)
joins without an equality              :mod:`dagger.sql.joins` (a constant key on both sides)
``SPLIT_INDEX``, ``TO_BASE64`` …       :mod:`dagger.sql.flink_functions`
``SimpleDateFormat`` patterns          :mod:`dagger.sql.datetime_patterns` (``hh:mm aa`` → ``hh:mm a``)
``FLOOR(ts TO MINUTE)``, ``CEIL(…)``   ``date_trunc('MINUTE', ts)`` (and the next unit up, for CEIL)
``LATERAL TABLE(f(x))``                ``LATERAL f(x)``
``ts.seconds``, ``ts.nanos``           :mod:`dagger.sql.timestamps` (computed from the TIMESTAMP column)
function library calls                 expanded in place (macros of :mod:`dagger.functions`)
=====================================  ===============================================================

Flink constructs Spark has no form of (window table-valued functions, ``MATCH_RECOGNIZE``, temporal joins
``FOR SYSTEM_TIME AS OF``) are errors that name the construct and the Spark alternative. A query with nothing
to rewrite is returned as written. No regular expressions touch the SQL: the few renames that must happen
before parsing (sqlglot's Spark parser cannot read ``SESSION(``, and would turn datetime patterns and
``TRUNCATE`` into its own, lossy forms) work on sqlglot's tokens.

One module (~400 lines): the rewrite's passes run in one order over one syntax tree; each kind of rewrite with
state of its own lives in its own module (windows, joins, unnest, timestamps, retention).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from dagger.errors import SqlError
from dagger.sql.datetime_patterns import PATTERN_ARGUMENT, spark_pattern
from dagger.sql.flink_functions import FLINK_FUNCTIONS
from dagger.sql.joins import add_join_keys
from dagger.sql.parsed import parsed
from dagger.sql.state import bound_joins
from dagger.sql.timestamps import rewrite_timestamp_fields
from dagger.sql.unnest import rewrite_unnests
from dagger.sql.windows import SESSION_PLACEHOLDER, lift_rowtimes, rewrite_window

_PROTECTED = SESSION_PLACEHOLDER.removesuffix("SESSION")  # "__FLINK_FORM_": renamed calls
#: functions sqlglot would parse into its own forms (and print back differently): renamed before parsing
_RENAMED = (set(PATTERN_ARGUMENT) - {"FORMATTIMEINZONE"}) | set(FLINK_FUNCTIONS) | {"SESSION"}
_TIME_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND"}


@dataclass
class Rewrite:
    """A query as Spark runs it, and what was changed and why (shown by ``dagger validate``)."""

    sql: str
    notes: list[str] = field(default_factory=list)


def rewrite_sql(sql: str, macros: dict | None = None, schemas: dict[str, Any] | None = None) -> str:
    """The Spark SQL of ``sql`` (see :func:`rewrite_query`)."""
    return rewrite_query(sql, macros, schemas).sql


def rewrite_query(
    sql: str,
    macros: dict | None = None,
    schemas: dict[str, Any] | None = None,
    retention_minutes: float = 0,
    rowtime: str = "rowtime",
) -> Rewrite:
    """Rewrite Dagger's (Flink's) SQL ``sql`` into Spark SQL.

    Parameters
    ----------
    sql:
        One query.
    macros:
        Upper-cased function name → rewrite of a call (the job's function library, :mod:`dagger.functions`).
    schemas:
        Input table → Spark schema, used to tell arrays of rows, arrays and maps apart in ``UNNEST`` and to find
        the Timestamp fields whose ``seconds``/``nanos`` a query reads.
    retention_minutes:
        ``FLINK_RETENTION_IDLE_STATE_MINUTE``: joins of two input streams without a time bound get that bound
        (:func:`dagger.sql.state.bound_joins`); 0 leaves them unbounded.
    """
    macros = macros or {}
    protected, renamed = _protect(sql, set(macros))
    tree = _parse(protected)
    notes: list[str] = []
    changed = bool(renamed)

    unnest_notes = rewrite_unnests(tree, schemas or {})
    notes += unnest_notes
    changed |= bool(unnest_notes)

    timestamp_notes = rewrite_timestamp_fields(tree, schemas or {})
    notes += timestamp_notes
    changed |= bool(timestamp_notes)

    tree, rowtime_notes = lift_rowtimes(tree)
    notes += rowtime_notes
    changed |= bool(rowtime_notes)

    def functions(node: exp.Expression) -> exp.Expression:
        nonlocal changed
        replaced = _flink_call(node, notes)
        if replaced is not node:
            changed = True
        return replaced

    tree = _bottom_up(tree, functions)

    def groups(node: exp.Expression) -> exp.Expression:
        nonlocal changed
        name = _name(node)
        if isinstance(node, exp.Lateral) and name is None and _name(node.this) == "TABLE":
            if len(node.this.expressions) == 1:
                changed = True
                node.set("this", node.this.expressions[0])  # LATERAL TABLE(f(x)) -> LATERAL f(x)
                return node
        spark_window = rewrite_window(name, node) if name else None
        if spark_window is not None:
            changed = True
            _note(notes, f"{_shown(node)} → {spark_window.sql(dialect='spark')}")
            return spark_window
        call = _call(node, macros)
        if call is not None:
            changed = True
            return _expand(macros[call[0]], node, call[1])
        return node

    for _ in range(20):  # a macro's expansion may hold further macro calls (Filters(..., CondEq(...)))
        tree = tree.transform(groups)
        if not any(_call(n, macros) for n in tree.find_all(exp.Func)):
            break

    bound_notes = bound_joins(tree, retention_minutes, set(schemas or {}), rowtime)
    notes += bound_notes
    changed |= bool(bound_notes)

    join_notes = add_join_keys(tree)
    notes += join_notes
    changed |= bool(join_notes)
    if not changed:
        return Rewrite(sql, notes)
    tree = _bottom_up(tree, _restore)
    return Rewrite(tree.sql(dialect="spark"), notes)


def _bottom_up(tree: exp.Expression, fn) -> exp.Expression:  # noqa: ANN001
    """Apply ``fn`` to every node, children before their parents (so a rewritten call's arguments, copied
    into its replacement, are rewritten already)."""
    for node in reversed(list(tree.walk())):
        new = fn(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


# -- before parsing ------------------------------------------------------------------------------------------


def _protect(sql: str, user_functions: set[str]) -> tuple[str, list[str]]:
    """Reject what Spark cannot run; rename the calls sqlglot would reinterpret (``name(`` → ``__FLINK_FORM_NAME(``)."""
    from sqlglot.dialects.spark import Spark

    try:
        tokens = Spark().tokenize(sql)
    except TokenError as exc:
        raise SqlError(f"FLINK_SQL_QUERY cannot be read: {exc}") from None
    texts = [t.text.upper() for t in tokens]
    _unsupported(texts)
    edits = _quote_escapes(sql, tokens)
    for i, token in enumerate(tokens[:-1]):
        name = texts[i]
        if (
            name in _RENAMED
            and name not in user_functions
            and tokens[i + 1].token_type == TokenType.L_PAREN
            and (i == 0 or tokens[i - 1].token_type != TokenType.DOT)
            and token.token_type not in (TokenType.STRING, TokenType.IDENTIFIER)
        ):
            edits.append((token.start, token.end + 1, _PROTECTED + name))
    out = sql
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return out, [e[2] for e in edits]


def _quote_escapes(sql: str, tokens: list) -> list[tuple[int, int, str]]:
    """Standard SQL (Flink) escapes a quote inside a string by doubling it: ``'yyyy-MM-dd''T''HH:mm'``. Spark
    reads that as adjacent literals, concatenated (the quotes vanish), so touching string literals become one
    Spark literal with escaped quotes, ``'yyyy-MM-dd\\'T\\'HH:mm'``."""
    edits = []
    i = 0
    while i < len(tokens):
        j = i
        while (
            j + 1 < len(tokens)
            and tokens[j].token_type == TokenType.STRING
            and tokens[j + 1].token_type == TokenType.STRING
            and sql[tokens[j].end] == "'"
            and tokens[j].end + 1 == tokens[j + 1].start
        ):
            j += 1
        if j > i:
            parts = [sql[t.start + 1 : t.end] for t in tokens[i : j + 1]]
            edits.append((tokens[i].start, tokens[j].end + 1, "'" + "\\'".join(parts) + "'"))
        i = j + 1
    return edits


def _unsupported(texts: list[str]) -> None:
    """Flink constructs with no Spark form: one clear error each."""
    for i, text in enumerate(texts):
        following = texts[i + 1 : i + 4]
        if text == "TABLE" and following[:1] == ["("] and following[1:2] and following[1] in _WINDOW_TVFS:
            raise SqlError(
                f"FLINK_SQL_QUERY: Flink's window table-valued function TABLE({following[1]}(TABLE …, DESCRIPTOR(…), …)) "
                "is not supported; write a group window, GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE) (or HOP, SESSION), "
                "which Dagger documents and Spark runs as window()/session_window()"
            )
        if text == "MATCH_RECOGNIZE":
            raise SqlError(
                "FLINK_SQL_QUERY: MATCH_RECOGNIZE (Flink's pattern recognition) has no Spark SQL equivalent; express the "
                "pattern with window aggregations and conditions, or in a transformer using Spark's transformWithState"
            )
        if text == "FOR" and following == ["SYSTEM_TIME", "AS", "OF"]:
            raise SqlError(
                "FLINK_SQL_QUERY: temporal table joins (FOR SYSTEM_TIME AS OF) are not supported by Spark streaming; "
                "enrich rows with a post-processor external_source (http, pg, grpc, es) or join two streams on a "
                "time interval"
            )


_WINDOW_TVFS = {"TUMBLE", "HOP", "CUMULATE", "SESSION"}


def _parse(sql: str) -> exp.Expression:
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
    return statements[0]


# -- the passes ---------------------------------------------------------------------------------------------


def _name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    return None


def _shown(node: exp.Expression) -> str:
    """A node as the user wrote it (placeholders named back)."""
    return _bottom_up(node.copy(), _restore).sql(dialect="spark").replace(SESSION_PLACEHOLDER.lower(), "SESSION")


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)


def _flink_call(node: exp.Expression, notes: list[str]) -> exp.Expression:
    """A Flink function call, a datetime pattern, or ``FLOOR/CEIL(ts TO unit)`` in its Spark form."""
    if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("to") is not None:
        unit = node.args["to"].name.upper()
        if unit not in _TIME_UNITS:
            raise SqlError(f"{node.sql()}: unknown time unit {unit}; accepted: {', '.join(sorted(_TIME_UNITS))}")
        truncated = exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string(unit), node.this.copy()])
        if isinstance(node, exp.Floor):
            out = truncated
        else:
            out = sqlglot.parse_one(
                f"CASE WHEN {truncated.sql('spark')} = {node.this.sql('spark')} THEN {node.this.sql('spark')} "
                f"ELSE {truncated.sql('spark')} + INTERVAL 1 {unit} END",
                read="spark",
            )
        _note(notes, f"{_shown(node)} → {_shown(out)}")
        return out
    name = _name(node)
    if name is None:
        return node
    if name.startswith(_PROTECTED):
        name = name[len(_PROTECTED) :]
    if name in FLINK_FUNCTIONS and _name(node) != name:
        out = FLINK_FUNCTIONS[name].expand(name, list(node.expressions))
        _note(notes, f"{name}(…) → {_shown(out)}")
        return out
    if name in PATTERN_ARGUMENT:
        _translate_pattern(node, name, notes)
    return node


def _translate_pattern(node: exp.Anonymous, name: str, notes: list[str]) -> None:
    index = PATTERN_ARGUMENT[name]
    if len(node.expressions) <= index:
        return
    argument = node.expressions[index]
    literal = argument.unnest()
    while isinstance(literal, exp.Cast):
        literal = literal.this.unnest()
    if not (isinstance(literal, exp.Literal) and literal.is_string):
        return  # computed at run time: Spark reads it as it is
    spark = spark_pattern(literal.this, f"{name}(…, {literal.sql(dialect='spark')})")
    if spark != literal.this:
        literal.replace(exp.Literal.string(spark))
        _note(notes, f"{name} pattern {literal.sql(dialect='spark')} → {exp.Literal.string(spark).sql('spark')}")


def _restore(node: exp.Expression) -> exp.Expression:
    """``__FLINK_FORM_DATE_FORMAT(…)`` → ``date_format(…)`` (printed as written, never through sqlglot's forms)."""
    name = _name(node)
    if name and name.startswith(_PROTECTED):
        node.set("this", name[len(_PROTECTED) :].lower())
    return node


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


def referenced_columns(sql: str) -> set[str] | None:
    """Every name the query mentions, lower-cased (columns, struct fields, aliases), or ``None`` when it may
    read every column: it selects ``*`` / ``t.*`` / ``struct(*)`` (``COUNT(*)`` reads none) or cannot be parsed.
    A superset of the columns the query reads, which is what pruning and compatibility checks need."""
    tree = parsed(sql)
    if tree is None:
        return None
    if any(not isinstance(star.parent, exp.Count) and not _keys_only(star) for star in tree.find_all(exp.Star)):
        return None
    return {identifier.name.lower() for identifier in tree.find_all(exp.Identifier)}


def _keys_only(star: exp.Star) -> bool:
    """``SELECT *, 0 AS __dagger_join_key_t FROM t`` inside a key-less join's wrapper reads what its outer
    query reads, which the outer query's identifiers already name."""
    select = star.find_ancestor(exp.Select)
    return (
        select is not None
        and isinstance(select.parent, exp.Subquery)
        and any(e.alias.startswith("__dagger_join_key_") for e in select.expressions if isinstance(e, exp.Alias))
    )


def reads_event_time(sql: str) -> bool:
    """Whether the result of ``sql`` (as Spark runs it) depends on the watermark: it groups or aggregates, joins
    two relations, removes duplicates or uses window functions. A query that only filters and projects rows never
    drops a record as late (or cannot be parsed: ``True``, to be safe)."""
    tree = parsed(sql)
    if tree is None:
        return True
    if tree.find(exp.Group, exp.Distinct, exp.Window, exp.AggFunc) is not None:
        return True
    return any(not isinstance(join.this, exp.Unnest) for join in tree.find_all(exp.Join))
