"""User Python UDFs from ``PYTHON_UDF_CONFIG`` (``PYTHON_FILES``: ``.py`` / ``.zip``, local paths or http(s)).

Dagger's convention holds: in ``multiply.py`` the function ``multiply`` is registered as ``MULTIPLY``; a file
may also declare functions with ``@udfs.udf(returns=...)``. The code is shipped to executors by value
(cloudpickle) and the files are added with ``SparkContext.addPyFile`` so that helper imports work on a cluster.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError, UdfError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.model import JobConfig

log = logging.getLogger("dagger.python_udfs")

_SPARK_TYPES = {float: "double", int: "bigint", str: "string", bool: "boolean", bytes: "binary"}


def _fetch(location: str, workdir: Path) -> Path:
    if location.startswith(("http://", "https://")):
        import requests

        try:
            response = requests.get(location, timeout=30)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise DaggerConfigError(f"PYTHON_UDF_CONFIG.PYTHON_FILES: cannot download {location}: {exc}") from None
        target = workdir / Path(location.split("?")[0]).name
        target.write_bytes(response.content)
        return target
    path = Path(location.removeprefix("file://"))
    if not path.is_file():
        raise DaggerConfigError(f"PYTHON_UDF_CONFIG.PYTHON_FILES: {location} does not exist (a .py or .zip file)")
    return path


def _return_type(func: Any, file: str) -> str:
    annotation = inspect.signature(func).return_annotation
    if annotation in _SPARK_TYPES:
        return _SPARK_TYPES[annotation]
    if isinstance(annotation, str) and annotation in {t.__name__ for t in _SPARK_TYPES}:
        return next(v for k, v in _SPARK_TYPES.items() if k.__name__ == annotation)
    raise DaggerConfigError(
        f"Python UDF {func.__name__} in {file}: give it a return type, either an annotation (-> float, int, str, "
        "bool, bytes) or @udfs.udf(returns='<Spark SQL type>')"
    )


def _import(path: Path, module_name: str) -> Any:
    from pyspark import cloudpickle  # the copy PySpark pickles functions with

    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise DaggerConfigError(
            f"Python UDF file {path.name} cannot be imported: {type(exc).__name__}: {exc}"
        ) from None
    cloudpickle.register_pickle_by_value(module)  # executors get the code itself, not an import by name
    return module


def _functions_of_file(module: Any, stem: str, file: str) -> list[Any]:
    from udfs import declared
    from udfs.registry import Function

    found = [f for value in vars(module).values() for f in declared(value) if f.module == module.__name__]
    conventional = getattr(module, stem, None)
    if callable(conventional) and not declared(conventional):
        found.append(
            Function(
                stem.upper(),
                "python",
                f"{stem.upper()}(...)",
                (conventional.__doc__ or "").strip(),
                returns=_return_type(conventional, file),
                impl=conventional,
                module=module.__name__,
            )
        )
    for function in found:
        function.dagger_notes = file  # where it came from, for error messages
    if not found:
        raise DaggerConfigError(
            f"Python UDF file {file}: no function named {stem!r} (Dagger's convention: the function is named like "
            "its file) and none decorated with @udfs.udf"
        )
    return found


def load_python_udfs(config: JobConfig, spark: SparkSession | None = None) -> list[Any]:
    """Import every ``PYTHON_FILES`` entry; returns the functions to register (and ships the files)."""
    if not config.PYTHON_UDF_ENABLE or config.PYTHON_UDF_CONFIG is None:
        return []
    workdir = Path(tempfile.mkdtemp(prefix="dagger-udfs-"))
    functions = []
    for location in config.PYTHON_UDF_CONFIG.PYTHON_FILES:
        path = _fetch(location, workdir)
        tag = hashlib.sha1(str(path).encode()).hexdigest()[:8]
        if path.suffix == ".py":
            functions += _functions_of_file(_import(path, f"dagger_udf_{path.stem}_{tag}"), path.stem, path.name)
        elif path.suffix == ".zip":
            sys.path.insert(0, str(path))
            with zipfile.ZipFile(path) as archive:
                members = [n for n in archive.namelist() if n.endswith(".py") and not n.endswith("__init__.py")]
            for member in members:
                dotted = member[:-3].replace("/", ".")
                module = importlib.import_module(dotted)
                from pyspark import cloudpickle

                cloudpickle.register_pickle_by_value(module)
                functions += _functions_of_file(module, Path(member).stem, f"{path.name}:{member}")
        else:
            raise DaggerConfigError(f"PYTHON_UDF_CONFIG.PYTHON_FILES: {location} is neither a .py nor a .zip file")
        if spark is not None:
            spark.sparkContext.addPyFile(str(path))
        log.info("Python UDFs from %s: %s", location, ", ".join(f.name for f in functions))
    return functions


def _vectorized(func: Any) -> str | None:
    hints = [p.annotation for p in inspect.signature(func).parameters.values()]
    names = {getattr(h, "__name__", str(h)) for h in hints}
    if names & {"Array", "pa.Array", "pyarrow.Array", "ChunkedArray"}:
        return "arrow"
    if names & {"Series", "pd.Series", "pandas.Series"}:
        return "pandas"
    return None


def register_python(spark: SparkSession, function: Any) -> None:
    """Register a user function: vectorized when its parameters are Arrow arrays or pandas Series, else an
    Arrow-optimized row-at-a-time Python UDF (the user wrote it per row)."""
    from pyspark.sql.functions import arrow_udf, pandas_udf, udf

    func, name, file = function.impl, function.name, function.dagger_notes or function.module
    kind = _vectorized(func)

    # a row-wise function's annotations convert its arguments (SQL's 2.0 is a DECIMAL, float(x) expected)
    hints = [p.annotation for p in inspect.signature(func).parameters.values()]
    converters = [h if kind is None and h in (float, int, str, bool) else None for h in hints]

    def named(*args: Any) -> Any:
        try:
            if kind is None:
                args = tuple(
                    c(a) if c is not None and a is not None else a
                    for c, a in zip(converters + [None] * len(args), args, strict=False)
                )
            return func(*args)
        except Exception as exc:
            shown = args if kind is None else tuple(_first(a) for a in args)
            what = "input" if kind is None else "batch starting with"
            raise UdfError(
                f"Python UDF {name} ({file}) failed on {what} {shown!r}: {type(exc).__name__}: {exc}"
            ) from exc

    named.__name__ = func.__name__
    if kind == "arrow":
        from pyspark.util import PythonEvalType

        wrapped = arrow_udf(named, function.returns, PythonEvalType.SQL_SCALAR_ARROW_UDF)
    elif kind == "pandas":
        from pyspark.util import PythonEvalType

        wrapped = pandas_udf(named, function.returns, PythonEvalType.SQL_SCALAR_PANDAS_UDF)
    else:
        wrapped = udf(named, function.returns, useArrow=True)
    spark.udf.register(name, wrapped)


def _first(column: Any) -> Any:
    try:
        return column[0].as_py() if hasattr(column[0], "as_py") else column.iloc[0]
    except (IndexError, KeyError, AttributeError):
        return None
