"""The SQL functions a job can call: the built-in library (``udfs``), functions registered by packages
(:mod:`dagger.plugins.udf`), the modules named by ``FUNCTION_FACTORY_CLASSES`` and the user files of ``PYTHON_UDF_CONFIG``, registered with the session before
the job's SQL runs. Macros (and every aggregate) are applied by the SQL rewrite instead (see ``udfs.declare``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError, UdfError
from dagger.plugins.udf import UDFS, FunctionSettings, register_udf
from dagger.python_udfs import register_python
from udfs import declared, library
from udfs.declare import UdfContext, functions_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.model import JobConfig
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger("dagger.functions")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class FunctionCatalog:
    """Functions by upper-cased name (SQL names are case-insensitive)."""

    functions: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    _macros: dict[str, Callable] | None = field(default=None, repr=False)

    def add(self, function: Any, origin: str) -> None:
        key = function.name.upper()
        if key in self.functions and self.origin[key] != origin:
            log.warning("function %s from %s replaces the one from %s", function.name, origin, self.origin[key])
        self.functions[key] = function
        self.origin[key] = origin
        self._macros = None

    @property
    def macros(self) -> dict[str, Callable]:
        """Upper-cased name → rewrite of a call (for :func:`dagger.sql.rewrite.rewrite_sql`).

        SQL and Arrow functions are inlined too (the body with the arguments substituted, or a direct call of
        the Arrow UDF): Spark refuses SQL functions inside lambdas and generators (``explode``, ``LATERAL``), and
        an inlined body is what Spark would run anyway. Built once (parsing the SQL bodies takes ~40 ms).
        """
        if self._macros is None:
            out = {}
            for key, function in self.functions.items():
                if function.kind == "macro":
                    out[key] = function.impl
                elif function.kind in ("sql", "arrow"):
                    out[key] = inline(function)
            self._macros = out
        return self._macros

    def needed(self, texts: list[str]) -> set[str]:
        """Keys of the functions a job can call, given every text it runs (its SQL as rewritten, its settings).

        A function is needed when its name or internal name appears in a text as a word, or in the body of a
        needed SQL function; a needed macro may expand to any internal helper, so it keeps them all. The
        others need not be registered with the session (each Arrow UDF costs ~10 ms at every job start).
        """
        words = {w.upper() for text in texts for w in _WORD.findall(text)}
        internal = {f.internal_name.upper(): key for key, f in self.functions.items()}
        keys = {k for k in self.functions if k in words} | {internal[w] for w in words if w in internal}
        pending = [k for k in keys if self.functions[k].kind == "sql"]
        while pending:
            for word in _WORD.findall(self.functions[pending.pop()].body or ""):
                key = internal.get(word.upper(), word.upper())
                if key in self.functions and key not in keys:
                    keys.add(key)
                    pending.append(key)
        if any(self.functions[k].kind == "macro" for k in keys):
            keys |= {k for k, f in self.functions.items() if f.hidden}
        return keys

    def public(self) -> list[Any]:
        return [f for f in self.functions.values() if not f.hidden]


def factory_functions(spec: str) -> list[Any]:
    """The functions of one ``FUNCTION_FACTORY_CLASSES`` entry: ``package.module`` or ``package.module:attr``."""

    if spec.rsplit(".", 1)[-1] == "FunctionFactory" and spec.split(".")[0] in ("org", "io", "com"):
        return []  # Dagger's built-in Java factory: its functions are the built-in library, always registered
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DaggerConfigError(
            f"FUNCTION_FACTORY_CLASSES: cannot import {module_name!r} ({exc}); give Python modules (or "
            "module:attribute) on the job's PYTHONPATH, e.g. my_team.udfs"
        ) from None
    if not attribute:
        found = functions_of(module)
    else:
        value = getattr(module, attribute, None)
        if value is None:
            raise DaggerConfigError(f"FUNCTION_FACTORY_CLASSES: {module_name} has no attribute {attribute!r}")
        items = value if isinstance(value, (list, tuple)) else [value]
        found = [f for item in items for f in (declared(item) or ([item] if hasattr(item, "kind") else []))]
    if not found:
        raise DaggerConfigError(
            f"FUNCTION_FACTORY_CLASSES: {spec!r} declares no functions; decorate them with @udfs.udf(returns=...) "
            "or the udfs.declare decorators"
        )
    return found


#: the built-in library's functions by name, once registered (:func:`registered_functions`)
_LIBRARY: dict[str, Any] = {}


def registered_functions() -> dict[str, tuple[Any, str]]:
    """Every function of the registry (:mod:`dagger.plugins.udf`) by name, with where it comes from. The built-in
    library registers there as any package does, the first time, each function whose name no package took; a
    package's function of a library function's name, registered before or after, replaces it (with a warning)."""

    plugins = UDFS.plugins()  # registered in code, and installed packages' entry points
    if not _LIBRARY:
        for function in library():
            _LIBRARY[function.name] = function
            if function.name not in plugins:
                summary = function.doc.splitlines()[0] if function.doc else ""
                register_udf(function.name, FunctionSettings, lambda f=function: f, summary)
    found = {}
    for name, plugin in UDFS.plugins().items():
        function = plugin.build()
        if _LIBRARY.get(name) is function:
            found[name] = (function, "the built-in library")
            continue
        if name in _LIBRARY:
            log.warning("function %s registered by a package replaces the built-in library's", name)
        found[name] = (function, f"registered function {name}")
    return found


def build_catalog(config: JobConfig, python_functions: list[Any] = ()) -> FunctionCatalog:
    """The registered functions (the built-in library's and packages'), then the job's inputs: the modules of
    ``FUNCTION_FACTORY_CLASSES`` and the Python UDF files (later names replace earlier ones). The one place a job's
    functions are resolved."""

    catalog = FunctionCatalog()
    for function, origin in registered_functions().values():
        catalog.add(function, origin)
    for spec in config.FUNCTION_FACTORY_CLASSES:
        for function in factory_functions(spec):
            catalog.add(function, spec)
    for function in python_functions:
        catalog.add(function, function.module)
    return catalog


def udf_context(spark: SparkSession, config: JobConfig, descriptors: DescriptorSet) -> Any:
    """What context-dependent functions need: descriptors, the DARTS location, counters (accumulators)."""
    from udfs.darts import COUNTERS

    base = config.UDF_DART_BASE_URL or (
        f"gs://{config.UDF_DART_GCS_BUCKET_ID}" if config.UDF_DART_GCS_BUCKET_ID else None
    )
    counters = {name: spark.sparkContext.accumulator(0) for name in COUNTERS}
    return UdfContext(descriptor_set=descriptors.serialized, dart_base=base, counters=counters)


_PARAM = re.compile(r"\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s+")


def parameter_names(params: str) -> list[str]:
    """Names of a SQL parameter list (``"a DOUBLE, b ARRAY<STRUCT<x: INT, y: INT>>"`` → ``["a", "b"]``)."""
    names = []
    for part in _split_top(params):
        match = _PARAM.match(part)
        if match is None:
            raise ValueError(f"cannot read the parameter {part.strip()!r}")
        names.append(match.group(1))
    return names


def parameters(params: str) -> list[tuple[str, str, str | None]]:
    """``"a DOUBLE, tz STRING DEFAULT 'UTC'"`` → ``[("a", "DOUBLE", None), ("tz", "STRING", "'UTC'")]``."""
    out = []
    for name, part in zip(parameter_names(params), _split_top(params), strict=True):
        rest = part[_PARAM.match(part).end() :].strip()
        sql_type, _, default = rest.partition(" DEFAULT ")
        out.append((name, sql_type.strip(), default.strip() or None))
    return out


def _split_top(params: str) -> list[str]:
    """Split a parameter list on the commas that are not inside ``<...>`` or ``(...)``."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(params + ","):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            if params[start:i].strip():
                parts.append(params[start:i])
            start = i + 1
    return parts


def inline(function: Any) -> Callable[[list], str]:
    """A macro that expands a call of a SQL or Arrow function in place."""
    import sqlglot
    from sqlglot import exp

    params = parameters(function.params)
    body = sqlglot.parse_one(function.body, read="spark") if function.kind == "sql" else None

    def expand(args: list) -> str:
        required = sum(1 for _, _, default in params if default is None)
        if not required <= len(args) <= len(params):
            counts = f"{required}" if required == len(params) else f"{required} to {len(params)}"
            raise ValueError(f"{function.name} takes {counts} arguments ({function.params}), got {len(args)}")
        values = {}
        for i, (name, sql_type, default) in enumerate(params):
            given = args[i].sql(dialect="spark") if i < len(args) else default
            values[name.lower()] = f"CAST(({given}) AS {sql_type})"
        if body is None:
            return f"{function.internal_name}({', '.join(values[n.lower()] for n, _, _ in params)})"

        def substitute(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and not node.table and node.name.lower() in values:
                return sqlglot.parse_one(values[node.name.lower()], read="spark")
            return node

        return body.transform(substitute).sql(dialect="spark")

    return expand


def _named(function: Any, func: Callable) -> Callable:
    """``func`` with errors that name the SQL function (library messages already start with it)."""

    @functools.wraps(func)
    def call(*arrays: Any) -> Any:
        try:
            return func(*arrays)
        except Exception as exc:
            text = str(exc)
            if text.startswith(function.name.lstrip("_")):
                raise
            raise UdfError(f"{function.name}: {type(exc).__name__}: {text}") from exc

    return call


def register(
    spark: SparkSession,
    catalog: FunctionCatalog,
    context: Any,
    sql_functions: bool = True,
    only: set[str] | None = None,
) -> None:
    """Register every non-macro function of the catalog (or those whose keys are in ``only``) with ``spark``.

    ``sql_functions=False`` (jobs) leaves out the SQL functions of the public names (``CREATE TEMPORARY
    FUNCTION``, ~0.15 s each in a fresh session): a job's SQL reaches them only through
    :attr:`FunctionCatalog.macros`, which inline them; Arrow UDFs (called by their internal names), table and
    Python functions are registered either way.
    """

    from pyspark.sql.functions import arrow_udf, udtf
    from pyspark.util import PythonEvalType

    warnings.filterwarnings("ignore", message="It is preferred to specify type hints for arrow UDF")
    chosen = [f for key, f in catalog.functions.items() if only is None or key in only]
    ordered = sorted(chosen, key=lambda f: (not f.hidden, f.kind != "arrow"))
    for function in ordered:
        if function.kind == "arrow":
            func = function.impl(context) if function.needs_context else function.impl
            spark.udf.register(
                function.internal_name,
                arrow_udf(_named(function, func), function.returns, PythonEvalType.SQL_SCALAR_ARROW_UDF),
            )
            if sql_functions and not function.hidden:  # a SQL function of the public name, for spark.sql() outside jobs
                arguments = ", ".join(parameter_names(function.params))
                _create(spark, function, f"{function.internal_name}({arguments})")
        elif function.kind == "sql" and sql_functions:
            _create(spark, function, function.body)
        elif function.kind == "table":
            spark.udtf.register(function.name, udtf(function.impl, returnType=function.returns))
        elif function.kind == "python":
            register_python(spark, function)


def _create(spark: SparkSession, function: Any, body: str) -> None:
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY FUNCTION {function.name}({function.params}) RETURNS {function.returns} "
        f"RETURN {body}"
    )
