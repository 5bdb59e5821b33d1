"""Aggregate functions, in the form Spark can run inside a streaming windowed ``GROUP BY``.

Spark cannot run Python aggregate functions in a streaming aggregation, so every aggregate is rewritten into
Spark's own aggregates — ``collect_list`` / ``collect_set`` — plus a scalar finisher over the collected array
(SQL where possible). The group's values live in Spark's state store until the window closes, exactly as they
lived in Dagger's accumulators.
"""

from __future__ import annotations

from sqlglot import exp

from udfs.declare import Example, arrow_function, literal, macro, macro_args, rows, sql_function

_SETUP = "SELECT * FROM VALUES ('a', 1.0D, 'x'), ('a', 2.0D, 'y'), ('a', 3.0D, 'x'), ('b', 10.0D, 'z') AS v(k, n, s)"


@macro(
    "CollectArray",
    "CollectArray([DISTINCT] value) -> ARRAY",
    aggregate=True,
    examples=[
        Example(
            "SELECT k, array_sort(CollectArray(s)) FROM t GROUP BY k ORDER BY k",
            [("a", ["x", "x", "y"]), ("b", ["z"])],
            _SETUP,
        ),
        Example(
            "SELECT k, array_sort(CollectArray(DISTINCT s)) FROM t GROUP BY k ORDER BY k",
            [("a", ["x", "y"]), ("b", ["z"])],
            _SETUP,
        ),
    ],
    notes="NULL values are not collected (Spark's collect_list). Element order follows arrival order within a "
    "partition and is not guaranteed across partitions, as in Dagger.",
)
def collect_array(args: list) -> str:
    """Every value of the group as an array (``DISTINCT``: each value once)."""
    if len(args) == 1 and isinstance(args[0], exp.Distinct):
        return f"collect_set({', '.join(a.sql(dialect='spark') for a in args[0].expressions)})"
    (value,) = macro_args("CollectArray", args, 1)
    return f"collect_list({value})"


@macro(
    "DistinctCount",
    "DistinctCount(value) -> INT",
    aggregate=True,
    examples=[Example("SELECT k, DistinctCount(s) FROM t GROUP BY k ORDER BY k", [("a", 2), ("b", 1)], _SETUP)],
    notes="Exact (a set per group), as Dagger's accumulator is; NULL is not counted.",
)
def distinct_count(args: list) -> str:
    """The exact number of distinct non-null values in the group (streaming-safe, unlike COUNT(DISTINCT))."""
    (value,) = macro_args("DistinctCount", args, 1)
    return f"size(collect_set({value}))"


_POS = "(p * (size(s) + 1) / 100)"
_LOW = f"CAST(floor({_POS}) AS INT)"


@sql_function("__PercentileOf", "s ARRAY<DOUBLE>, p DOUBLE", "DOUBLE")
def percentile_of() -> str:
    """Finisher of PercentileAggregator: Apache Commons Math's default (legacy) estimate over a sorted array."""
    return (
        "CASE WHEN p IS NULL OR p <= 0 OR p > 100 THEN "
        "raise_error(concat('PercentileAggregator: the percentile must be in (0, 100], got ', CAST(p AS STRING))) "
        "WHEN s IS NULL OR size(s) = 0 THEN NULL "
        "WHEN size(s) = 1 THEN s[0] "
        f"WHEN {_POS} < 1 THEN s[0] "
        f"WHEN {_POS} >= size(s) THEN s[size(s) - 1] "
        f"ELSE s[{_LOW} - 1] + ({_POS} - floor({_POS})) * (s[{_LOW}] - s[{_LOW} - 1]) END"
    )


@macro(
    "PercentileAggregator",
    "PercentileAggregator(percentile DOUBLE, value DOUBLE) -> DOUBLE",
    aggregate=True,
    examples=[
        Example(
            "SELECT k, PercentileAggregator(50, n) FROM t GROUP BY k ORDER BY k", [("a", 2.0), ("b", 10.0)], _SETUP
        ),
        Example("SELECT PercentileAggregator(90, n) FROM t", [(10.0,)], _SETUP),
        Example("SELECT PercentileAggregator(25, n) FROM t", [(1.25,)], _SETUP),
    ],
    notes="Exact, with Apache Commons Math's default estimation (position p·(n+1)/100, linear between "
    "neighbours) as Dagger computes it; Spark's own ``percentile`` interpolates differently. An empty group "
    "gives NULL (Dagger: NaN).",
)
def percentile_aggregator(args: list) -> str:
    """The ``percentile`` (0-100] of the group's values."""
    percentile, value = macro_args("PercentileAggregator", args, 2)
    return f"__PercentileOf(array_sort(collect_list(CAST({value} AS DOUBLE))), CAST({percentile} AS DOUBLE))"


# -- Feast feature rows ---------------------------------------------------------------------------------------

FEATURE_TYPES = (
    "ByteType",
    "StringType",
    "IntegerType",
    "LongType",
    "DoubleType",
    "FloatType",
    "BooleanType",
    "TimestampType",
)


def _feature(name: str, value: str, type_sql: str) -> str:
    return f"__Feature({name}, {type_sql}, to_json(named_struct('v', {value})))"


def _pairs(function: str, args: list, width: int) -> list[list]:
    if not args or len(args) % width:
        what = "name, value" if width == 2 else "name, value, type"
        raise ValueError(f"{function} takes ({what}) groups of {width} arguments, got {len(args)} argument(s)")
    return [args[i : i + width] for i in range(0, len(args), width)]


def _typed_features(function: str, args: list) -> str:
    rows = []
    for name, value, kind in _pairs(function, args, 3):
        type_name = literal(function, kind, "the feature type")
        if type_name not in FEATURE_TYPES:
            raise ValueError(f"{function}: unknown feature type {type_name!r}; accepted: {', '.join(FEATURE_TYPES)}")
        rows.append(_feature(name.sql(dialect="spark"), value.sql(dialect="spark"), f"'{type_name}'"))
    return f"array({', '.join(rows)})"


@macro(
    "Features",
    "Features(name STRING, value ANY[, name, value ...]) -> ARRAY<feature row>",
    python=True,
    aggregate=True,
    examples=[
        Example(
            "SELECT f.name, f.value.double_val, f.value.string_val FROM (SELECT explode(Features(s, n)) AS f FROM t "
            "WHERE k = 'b')",
            [("z", 10.0, None)],
            _SETUP,
        )
    ],
    notes="A feature row is ``STRUCT<name, value STRUCT<bytes_val, string_val, int32_val, int64_val, double_val, "
    "float_val, bool_val, timestamp_val STRUCT<seconds, nanos>>, key>`` — Dagger's (name, 8-slot value, name) Row "
    "with Feast's field names; the slot is chosen by the value's SQL type (DECIMAL goes to double_val).",
)
def features(args: list) -> str:
    """Feast feature rows, one per (name, value) pair per row of the group."""
    rows = [
        _feature(name.sql(dialect="spark"), value.sql(dialect="spark"), f"typeof({value.sql(dialect='spark')})")
        for name, value in _pairs("Features", args, 2)
    ]
    return f"flatten(collect_list(array({', '.join(rows)})))"


@macro(
    "FeaturesWithType",
    "FeaturesWithType(name STRING, value ANY, type STRING[, ...]) -> ARRAY<feature row>",
    python=True,
    aggregate=True,
    examples=[
        Example(
            "SELECT f.name, f.value.int64_val FROM (SELECT explode(FeaturesWithType('count', n, 'LongType')) AS f "
            "FROM t WHERE k = 'b')",
            [("count", 10)],
            _SETUP,
        )
    ],
    notes="Types are Dagger's ValueEnum names: " + ", ".join(FEATURE_TYPES) + ".",
)
def features_with_type(args: list) -> str:
    """Feast feature rows with the value slot given by an explicit type name, for every row of the group."""
    return f"flatten(collect_list({_typed_features('FeaturesWithType', args)}))"


@macro(
    "SingleFeatureWithType",
    "SingleFeatureWithType(name STRING, value ANY, type STRING[, ...]) -> ARRAY<feature row>",
    python=True,
    examples=[
        Example(
            "SELECT f.name, f.value.bool_val FROM (SELECT explode(SingleFeatureWithType('ok', 'true', 'BooleanType')) AS f)",
            [("ok", True)],
        )
    ],
)
def single_feature_with_type(args: list) -> str:
    """Feast feature rows for one row (the scalar form of FeaturesWithType)."""
    return _typed_features("SingleFeatureWithType", args)


FEATURE_ROW = (
    "STRUCT<name: STRING, value: STRUCT<bytes_val: BINARY, string_val: STRING, int32_val: INT, int64_val: BIGINT, "
    "double_val: DOUBLE, float_val: FLOAT, bool_val: BOOLEAN, timestamp_val: STRUCT<seconds: BIGINT, nanos: INT>>, "
    "key: STRING>"
)
# SQL type (typeof) -> Dagger ValueEnum
_BY_SQL_TYPE = {
    "binary": "ByteType",
    "string": "StringType",
    "int": "IntegerType",
    "smallint": "IntegerType",
    "tinyint": "IntegerType",
    "bigint": "LongType",
    "double": "DoubleType",
    "float": "FloatType",
    "boolean": "BooleanType",
    "timestamp": "TimestampType",
    "timestamp_ntz": "TimestampType",
}
_SLOT = {
    "ByteType": "bytes_val",
    "StringType": "string_val",
    "IntegerType": "int32_val",
    "LongType": "int64_val",
    "DoubleType": "double_val",
    "FloatType": "float_val",
    "BooleanType": "bool_val",
    "TimestampType": "timestamp_val",
}


def _feature_value(kind: str, value: object) -> object:
    import base64
    import datetime as dt
    import json

    if kind == "ByteType":
        return base64.b64decode(value) if isinstance(value, str) else bytes(value)
    if kind == "StringType":
        return value if isinstance(value, str) else json.dumps(value)
    if kind in ("IntegerType", "LongType"):
        return int(float(value)) if isinstance(value, str) else int(value)
    if kind in ("DoubleType", "FloatType"):
        return float(value)
    if kind == "BooleanType":
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"
    # TimestampType: Spark writes timestamps in JSON as ISO-8601; numbers are epoch seconds
    if isinstance(value, str):
        when = dt.datetime.fromisoformat(value)
        when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        micros = round(when.timestamp() * 1_000_000)
    else:
        micros = round(float(value) * 1_000_000)
    return {"seconds": micros // 1_000_000, "nanos": (micros % 1_000_000) * 1000}


def _slot_for(sql_type: str) -> str:
    if sql_type.startswith("decimal"):
        return "DoubleType"
    kind = _BY_SQL_TYPE.get(sql_type)
    if kind is None:
        accepted = ", ".join(sorted(_BY_SQL_TYPE))
        raise ValueError(f"Features: a value of SQL type {sql_type} cannot be a feature; accepted: {accepted}, decimal")
    return kind


def _feature_row_arrow_type():  # noqa: ANN202
    import pyarrow as pa

    value = pa.struct(
        [
            ("bytes_val", pa.binary()),
            ("string_val", pa.string()),
            ("int32_val", pa.int32()),
            ("int64_val", pa.int64()),
            ("double_val", pa.float64()),
            ("float_val", pa.float32()),
            ("bool_val", pa.bool_()),
            ("timestamp_val", pa.struct([("seconds", pa.int64()), ("nanos", pa.int32())])),
        ]
    )
    return pa.struct([("name", pa.string()), ("value", value), ("key", pa.string())])


@arrow_function("__Feature", "name STRING, type STRING, value_json STRING", FEATURE_ROW)
def feature_rows(name, kind, value_json):  # noqa: ANN001, ANN201 - pyarrow arrays
    """Build feature-row structs (the worker of Features / FeaturesWithType / SingleFeatureWithType)."""
    import json

    import pyarrow as pa

    out = []
    for n, k, v in rows(name, kind, value_json):
        slots = dict.fromkeys(_SLOT.values())
        value = None if v is None else json.loads(v).get("v")
        if value is not None and k != "void":
            enum = k if k in _SLOT else _slot_for(k)
            try:
                slots[_SLOT[enum]] = _feature_value(enum, value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Features: feature {n!r}: {value!r} is not a {enum} ({exc})") from None
        out.append({"name": n, "value": slots, "key": n})
    return pa.array(out, _feature_row_arrow_type())
