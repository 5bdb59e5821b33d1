"""Arrays, maps and strings: rewritten into Spark's built-in array and map functions (no Python)."""

from __future__ import annotations

from udfs.declare import Example, literal, macro, macro_args, sql_function

_NUMERIC = {"INTEGER": "INT", "LONG": "BIGINT", "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE", "OTHER": None}
_MODIFIERS = {"distinct": "array_distinct({})", "sorted": "array_sort({})", "sort": "array_sort({})"}


def _chain(function: str, array: str, operations: list[str]) -> str:
    for op in operations:
        if op not in _MODIFIERS:
            raise ValueError(f"{function}: unknown operation {op!r}; accepted: distinct, sorted")
        array = _MODIFIERS[op].format(array)
    return array


@macro(
    "ArrayAggregate",
    "ArrayAggregate(array ARRAY, operation STRING, input_type STRING) -> number or element",
    examples=[
        Example("SELECT ArrayAggregate(array(3, 1, 3), 'distinct.sum', 'Integer')", [(4,)]),
        Example("SELECT ArrayAggregate(array(1.0D, 2.0D), 'average', 'Double')", [(1.5,)]),
        Example("SELECT ArrayAggregate(array('b', 'a'), 'sorted.findFirst', 'Other')", [("a",)]),
        Example("SELECT ArrayAggregate(array(3, 1, 3), 'distinct.count', 'Integer')", [(2,)]),
    ],
    notes="NULL elements are skipped (Dagger's Java streams would fail on them). ``average`` of an empty array is "
    "NULL. ``Float`` input gives DOUBLE results, as in Dagger.",
)
def array_aggregate(args: list) -> str:
    """Aggregate an array: ``[distinct.|sorted.]*`` then one of ``sum``, ``average``, ``min``, ``max``, ``count``,
    ``findFirst``, ``findAny``. ``input_type`` is ``Integer``, ``Long``, ``Float``, ``Double`` or ``Other`` (only
    ``count``/``findFirst``/``findAny``)."""
    array, _, _ = macro_args("ArrayAggregate", args, 3)
    steps = literal("ArrayAggregate", args[1], "the operation").split(".")
    kind = literal("ArrayAggregate", args[2], "the input type").upper()
    if kind not in _NUMERIC:
        raise ValueError(
            f"ArrayAggregate: input type {args[2].this!r} is not one of Integer, Long, Float, Double, Other"
        )
    *mods, final = steps
    values = _chain("ArrayAggregate", f"filter({array}, e -> e IS NOT NULL)", mods)
    sql_type = _NUMERIC[kind]
    if final == "count":
        return f"CAST(size({values}) AS BIGINT)"
    if final in ("findFirst", "findAny"):
        return f"try_element_at({values}, 1)"
    if sql_type is None:
        raise ValueError(f"ArrayAggregate: {final!r} needs a numeric input type (Integer, Long, Float, Double)")
    if final == "sum":
        zero = "CAST(0 AS " + sql_type + ")"
        return f"aggregate({values}, {zero}, (acc, e) -> acc + CAST(e AS {sql_type}))"
    if final == "average":
        total = f"aggregate({values}, 0D, (acc, e) -> acc + CAST(e AS DOUBLE))"
        return f"try_divide({total}, nullif(size({values}), 0))"
    if final in ("min", "max"):
        return f"CAST(array_{final}({values}) AS {sql_type})"
    raise ValueError(
        f"ArrayAggregate: unknown aggregation {final!r}; accepted: sum, average, min, max, count, findFirst, findAny"
    )


@macro(
    "ArrayOperate",
    "ArrayOperate(array ARRAY, operation STRING, input_type STRING) -> ARRAY",
    examples=[Example("SELECT ArrayOperate(array(3, 1, 3), 'distinct.sorted', 'Integer')", [([1, 3],)])],
)
def array_operate(args: list) -> str:
    """Apply ``distinct`` and/or ``sorted`` (dot-chained, left to right) to an array."""
    array, _, _ = macro_args("ArrayOperate", args, 3)
    return _chain("ArrayOperate", array, literal("ArrayOperate", args[1], "the operation").split("."))


@macro(
    "ElementAt",
    "ElementAt(array ARRAY, index INT) -> element; "
    "ElementAt(array ARRAY<STRUCT>, array_field STRING, index INT, path STRING[, table STRING]) -> STRING",
    examples=[
        Example("SELECT ElementAt(array('a', 'b', 'c'), 0), ElementAt(array('a', 'b', 'c'), -1)", [("a", "c")]),
        Example("SELECT ElementAt(array('a'), 5)", [(None,)]),
        Example(
            "SELECT ElementAt(array(named_struct('loc', named_struct('lat', 1.5D))), 'items', 0, 'loc.lat')",
            [("1.5",)],
        ),
    ],
    notes="The nested path is resolved by Spark against the array's element type, so the ``array_field`` and "
    "``table`` arguments Dagger needed to find the proto descriptor are accepted and ignored.",
)
def element_at(args: list) -> str:
    """The element at a 0-based ``index`` (negative counts from the end; out of range gives NULL); with a
    ``path``, the nested field of that element, as a string."""
    if len(args) == 2:
        array, index = macro_args("ElementAt", args, 2)
        return f"try_element_at({array}, IF({index} >= 0, {index} + 1, {index}))"
    array, _, index, *_ = macro_args("ElementAt", args, 4, 5)
    path = literal("ElementAt", args[3], "the path")
    fields = "".join(f".`{part}`" for part in path.split("."))
    return f"CAST(try_element_at({array}, IF({index} >= 0, {index} + 1, {index})){fields} AS STRING)"


@macro(
    "MapGet",
    "MapGet(map MAP, key) -> value",
    examples=[Example("SELECT MapGet(map('a', 1, 'b', 2), 'b'), MapGet(map('a', 1), 'z')", [(2, None)])],
    notes="Proto maps are Spark MAPs in this project (Dagger passed arrays of key/value rows).",
)
def map_get(args: list) -> str:
    """The value for ``key`` in a map, NULL when absent."""
    mapping, key = macro_args("MapGet", args, 2)
    return f"try_element_at({mapping}, {key})"


@macro(
    "ListContains",
    "ListContains(array ARRAY<STRING>, item STRING) -> BOOLEAN",
    examples=[Example("SELECT ListContains(array('a', 'b'), 'b'), ListContains(array('a'), 'z')", [(True, False)])],
)
def list_contains(args: list) -> str:
    """Whether the array holds ``item`` (false for a NULL array)."""
    array, item = macro_args("ListContains", args, 2)
    return f"coalesce(array_contains({array}, {item}), false)"


@macro(
    "Split",
    "Split(input STRING, delimiter STRING) -> ARRAY<STRING>",
    examples=[
        Example("SELECT Split('a,b,,c,,', ',')", [(["a", "b", "", "c"],)]),
        Example("SELECT Split('a b', ''), Split(NULL, ',')", [(["a", "b"], [])]),
    ],
    notes="Spark has a built-in ``split``, and SQL names are case-insensitive: a two-argument call gets Dagger's "
    "semantics here; Spark's three-argument ``split(str, regex, limit)`` is left as it is.",
)
def split(args: list) -> str:
    """Split by a Java regular expression, as Java's ``String.split`` does: trailing empty strings are removed;
    an empty delimiter means a space; a NULL input or delimiter gives an empty array."""
    if len(args) == 3:  # Spark's own split(str, regex, limit)
        return "split(" + ", ".join(a.sql(dialect="spark") for a in args) + ")"
    text, delimiter = macro_args("Split", args, 2)
    parts = f"split({text}, IF({delimiter} = '', ' ', {delimiter}), -1)"
    last = f"array_position(reverse(transform({parts}, x -> x != '')), true)"
    return (
        f"CASE WHEN {text} IS NULL OR {delimiter} IS NULL THEN CAST(array() AS ARRAY<STRING>) "
        f"WHEN {text} = '' THEN array('') "
        f"WHEN {last} = 0 THEN CAST(array() AS ARRAY<STRING>) "
        f"ELSE slice({parts}, 1, CAST(size({parts}) - {last} + 1 AS INT)) END"
    )


@sql_function(
    "ByteToString",
    "bytes BINARY",
    "STRING",
    examples=[Example("SELECT ByteToString(CAST('héllo' AS BINARY))", [("héllo",)])],
    notes="Proto ``bytes`` are BINARY columns here (Dagger passed ByteString).",
)
def byte_to_string() -> str:
    """The UTF-8 text of a bytes value."""
    return "CAST(bytes AS STRING)"
