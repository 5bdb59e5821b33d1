"""How a function of the library (or of a team's own module) is declared.

Four kinds, from fastest to slowest, and each function uses the fastest one that can express it faithfully:

``sql``
    A Spark SQL function (``CREATE TEMPORARY FUNCTION name(params) RETURNS type RETURN body``). Spark inlines
    the body into the query plan, so it runs in generated JVM code with no Python at all.
``macro``
    A rewrite of the call in the query's syntax tree (sqlglot) into built-in Spark expressions. Used for
    functions whose argument types vary (``ElementAt``, ``MapGet``), whose arguments are literals that shape
    the expression (``ArrayAggregate``'s operation), and for every aggregate, so that streaming aggregations
    use Spark's own aggregate functions (``collect_list``, ``collect_set``) instead of Python aggregates, which
    Spark cannot run in a streaming ``GROUP BY``.
``arrow``
    A vectorized Python function over ``pyarrow`` arrays (one call per Arrow batch), registered with
    ``arrow_udf`` under ``__dagger_<name>`` and wrapped by a SQL function of the public name so that optional
    arguments have defaults and argument types are coerced by Spark.
``table``
    A Python UDTF class (``LATERAL f(...)``, or Flink's ``LATERAL TABLE(f(...))``, which the SQL rewrite accepts).

Every declaration carries its documentation and examples; ``docs/functions.md`` is generated from them and a
test executes every example, so the page cannot drift from the code.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("sql", "macro", "arrow", "table")


@dataclass
class UdfContext:
    """What context-dependent functions get from the job; it travels to executors with the function."""

    descriptor_set: bytes | None = None  # serialized FileDescriptorSet of the job's descriptors
    dart_base: str | None = None  # DARTS location: a directory, http(s):// or gs:// prefix
    counters: dict[str, Any] = field(default_factory=dict)  # name -> Spark accumulator


@dataclass(frozen=True)
class Example:
    """A query using the function and the rows it returns (as Python values)."""

    sql: str
    result: list[tuple]
    setup: str | None = None  # a SELECT that becomes the temporary view ``t`` for the example


@dataclass
class Function:
    """One function of a library, under the name users write in SQL."""

    name: str
    kind: str
    signature: str  # as users call it, e.g. "GeoHash(latitude DOUBLE, longitude DOUBLE, length INT) -> STRING"
    doc: str
    params: str = ""  # SQL parameter list of sql/arrow functions
    returns: str = ""  # Spark SQL type of sql/arrow functions; output schema of table functions
    body: str | None = None  # sql: the RETURN expression
    impl: Any = None  # macro: f(args) -> sqlglot expression; arrow: f(*pa.Array) -> pa.Array; table: UDTF class
    aggregate: bool = False
    examples: list[Example] = field(default_factory=list)
    dagger_notes: str = ""  # where this differs from Raystack Dagger, and why
    module: str = ""
    needs_context: bool = False  # arrow: impl(context) returns the array function
    uses_python: bool = False  # macro: the expansion calls a vectorized Python worker

    @property
    def hidden(self) -> bool:
        """Internal helpers (``__Name``) are registered but not documented."""
        return self.name.startswith("__")

    @property
    def internal_name(self) -> str:
        """The name the Python part of an ``arrow`` function is registered under."""
        return f"__dagger_{self.name.lstrip('_').lower()}"


def _doc(func: Callable) -> str:
    return inspect.cleandoc(func.__doc__ or "")


def _declare(func: Callable, function: Function) -> Callable:
    function.module = func.__module__
    declared = getattr(func, "__dagger_functions__", [])
    func.__dagger_functions__ = [*declared, function]  # type: ignore[attr-defined]
    return func


def sql_function(
    name: str, params: str, returns: str, *, examples: list[Example] = (), notes: str = ""
) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Declare a Spark SQL function; the decorated function returns the SQL body (its docstring is the doc)."""

    def wrap(func: Callable[[], str]) -> Callable[[], str]:
        signature = f"{name}({params}) -> {returns}"
        return _declare(
            func,
            Function(name, "sql", signature, _doc(func), params, returns, func(), None, False, list(examples), notes),
        )

    return wrap


def macro(
    name: str,
    signature: str,
    *,
    aggregate: bool = False,
    examples: list[Example] = (),
    notes: str = "",
    python: bool = False,
) -> Callable[[Callable], Callable]:
    """Declare a rewrite: the decorated function takes the call's sqlglot arguments and returns Spark SQL text.

    ``python=True`` says that the expansion calls a vectorized Python worker (for the docs).
    """

    def wrap(func: Callable) -> Callable:
        function = Function(name, "macro", signature, _doc(func), impl=func, aggregate=aggregate)
        function.examples, function.dagger_notes, function.uses_python = list(examples), notes, python
        return _declare(func, function)

    return wrap


def arrow_function(
    name: str,
    params: str,
    returns: str,
    *,
    examples: list[Example] = (),
    notes: str = "",
    context: bool = False,
) -> Callable[[Callable], Callable]:
    """Declare a vectorized function over pyarrow arrays (one call per Arrow batch).

    With ``context=True`` the decorated function takes a :class:`UdfContext` and returns the array function
    (for functions that need the job's descriptors or reference-data location).
    """

    def wrap(func: Callable) -> Callable:
        signature = f"{name}({params}) -> {returns}"
        function = Function(
            name,
            "arrow",
            signature,
            _doc(func),
            params,
            returns,
            impl=func,
            examples=list(examples),
            dagger_notes=notes,
        )
        function.needs_context = context
        return _declare(func, function)

    return wrap


def table_function(
    name: str, params: str, returns: str, *, examples: list[Example] = (), notes: str = ""
) -> Callable[[type], type]:
    """Declare a Python UDTF; ``returns`` is its output schema (``"bucket STRING"``)."""

    def wrap(cls: type) -> type:
        signature = f"{name}({params}) -> TABLE({returns})"
        function = Function(
            name, "table", signature, _doc(cls), params, returns, impl=cls, examples=list(examples), dagger_notes=notes
        )
        return _declare(cls, function)

    return wrap


def rows(*arrays: Any) -> Any:
    """The values of equally long pyarrow arrays, row by row (for functions whose library works per value)."""
    return zip(*(a.to_pylist() for a in arrays), strict=True)


def macro_args(function: str, args: list, *counts: int) -> list[str]:
    """A macro's arguments as Spark SQL text, after checking how many there are."""
    if len(args) not in counts:
        accepted = " or ".join(map(str, counts))
        raise ValueError(f"{function} takes {accepted} arguments, got {len(args)}")
    return [a.sql(dialect="spark") for a in args]


def literal(function: str, node: Any, what: str) -> str:
    """The value of a string literal argument, or an error naming the function and the argument."""
    from sqlglot import exp

    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    raise ValueError(f"{function}: {what} must be a string literal, got {node.sql(dialect='spark')}")


def functions_of(module: Any) -> list[Function]:
    """Every function declared in ``module`` (in declaration order)."""
    found: list[Function] = []
    for value in vars(module).values():
        for function in getattr(value, "__dagger_functions__", []):
            if function.module == module.__name__ and function not in found:
                found.append(function)
    return found
