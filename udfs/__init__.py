"""Dagger on Spark's function library: every Raystack Dagger UDF under its Dagger name, and the decorator a
team uses for its own Python UDFs.

A job registers the whole library before its SQL runs. User functions::

    # multiply.py  (PYTHON_UDF_CONFIG {"PYTHON_FILES": "multiply.py"} registers MULTIPLY, as Dagger does)
    def multiply(a: float, b: float) -> float:
        return a * b

    # several functions in one file, or a vectorized one
    import pyarrow as pa
    import udfs

    @udfs.udf(returns="double")
    def half(x: pa.Array) -> pa.Array:
        return pa.compute.divide(x, 2.0)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from udfs.declare import Example, Function, UdfContext, functions_of

LIBRARY_MODULES = (
    "udfs.dates",
    "udfs.geo",
    "udfs.json_functions",
    "udfs.collections",
    "udfs.series",
    "udfs.aggregates",
    "udfs.tables",
    "udfs.longbow",
    "udfs.darts",
)

__all__ = ["Example", "Function", "UdfContext", "library", "udf"]


def library() -> list[Function]:
    """Every function of the built-in library."""
    found: list[Function] = []
    for name in LIBRARY_MODULES:
        found.extend(functions_of(importlib.import_module(name)))
    return found


def udf(returns: str, name: str | None = None) -> Callable[[Callable], Callable]:
    """Declare a user Python UDF returning the Spark SQL type ``returns`` (``"double"``, ``"array<string>"``).

    Parameters annotated ``pyarrow.Array`` (or ``pandas.Series``) make it vectorized: it gets whole columns of a
    batch. Otherwise it is called per row, over Arrow batches (Spark's Arrow-optimized Python UDF).
    """

    def wrap(func: Callable) -> Callable:
        function = Function(
            name or func.__name__,
            "python",
            f"{name or func.__name__}(...) -> {returns}",
            (func.__doc__ or "").strip(),
            returns=returns,
            impl=func,
        )
        function.module = func.__module__
        func.__dagger_functions__ = [*getattr(func, "__dagger_functions__", []), function]  # type: ignore[attr-defined]
        return func

    return wrap


def declared(value: Any) -> list[Function]:
    """The functions declared on an object (a decorated function or class)."""
    return list(getattr(value, "__dagger_functions__", []))
