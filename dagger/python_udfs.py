"""User Python UDFs from ``PYTHON_UDF_CONFIG``, as Dagger (PyFlink) takes them.

* ``PYTHON_FILES``: ``.py`` / ``.zip`` files — local paths, ``http(s)://`` or ``gs://`` (the ``gcs`` extra). In
  ``multiply.py`` the function ``multiply`` is registered as ``MULTIPLY`` (Dagger's convention); a file may also
  declare functions with ``@udfs.udf(returns=...)``. The code is shipped to executors by value (cloudpickle) and
  the files are added with ``SparkContext.addPyFile`` so that helper imports work on a cluster.
* ``PYTHON_ARCHIVES``: ``.zip`` (or ``.tar.gz``) archives, ``path#dir`` to name the directory; each is shipped
  to every executor and unpacked there (``SparkContext.addArchive``), and the UDFs run in the directory that holds
  them, so ``open("dir/file")`` works as in PyFlink.
* ``PYTHON_REQUIREMENTS``: a pip requirements file, installed once per content into a cache directory
  (``DAGGER_CACHE_DIR``, default ``~/.cache/dagger``), importable by the UDF files on the driver and shipped to the
  executors as an archive.
* ``PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE``, when set, is Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``.

One module (~330 lines) because ``PYTHON_UDF_CONFIG`` is one key with four parts (files, archives,
requirements, batch size) that are fetched, installed and shipped together.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError, UdfError
from udfs import declared
from udfs.declare import Function

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.model import JobConfig

log = logging.getLogger("dagger.python_udfs")

_SPARK_TYPES = {float: "double", int: "bigint", str: "string", bool: "boolean", bytes: "binary"}


def _fetch(location: str, workdir: Path, key: str) -> Path:
    """A local copy of ``location`` (a path, ``file://``, ``http(s)://`` or ``gs://``)."""
    from udfs.darts import read_location

    path = Path(location.removeprefix("file://"))
    if "://" not in location or location.startswith("file://"):
        if not path.is_file():
            raise DaggerConfigError(f"PYTHON_UDF_CONFIG.{key}: {location} does not exist")
        return path
    try:
        data = read_location(location)
    except Exception as exc:  # noqa: BLE001 - requests, google-cloud-storage: one message naming the location
        raise DaggerConfigError(f"PYTHON_UDF_CONFIG.{key}: cannot download {location}: {exc}") from None
    target = workdir / Path(location.split("?")[0]).name
    target.write_bytes(data)
    return target


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
    """Install ``PYTHON_REQUIREMENTS``, ship ``PYTHON_ARCHIVES`` and import every ``PYTHON_FILES`` entry; returns
    the functions to register (and ships the files)."""
    global _WORKER  # noqa: PLW0603 - what register_python's wrappers prepare in each Python worker
    if not config.PYTHON_UDF_ENABLE or config.PYTHON_UDF_CONFIG is None:
        return []
    udf = config.PYTHON_UDF_CONFIG
    workdir = Path(tempfile.mkdtemp(prefix="dagger-udfs-"))
    paths: list[str] = []
    if udf.PYTHON_REQUIREMENTS:
        installed = install_requirements(_fetch(udf.PYTHON_REQUIREMENTS, workdir, "PYTHON_REQUIREMENTS"))
        sys.path.insert(0, str(installed))  # the UDF files below import them on the driver
        if spark is not None:
            spark.sparkContext.addArchive(f"{_packed(installed)}#{REQUIREMENTS_DIR}")
        paths.append(REQUIREMENTS_DIR)
    archives = [a.strip() for a in (udf.PYTHON_ARCHIVES or "").split(",") if a.strip()]
    for entry in archives:
        location, _, target = entry.partition("#")
        path = _fetch(location, workdir, "PYTHON_ARCHIVES")
        if not path.name.endswith(_ARCHIVE_SUFFIXES):
            raise DaggerConfigError(
                f"PYTHON_UDF_CONFIG.PYTHON_ARCHIVES: {location} is not an archive; accepted: "
                + ", ".join(_ARCHIVE_SUFFIXES)
            )
        if spark is not None:
            spark.sparkContext.addArchive(f"{path}#{target or path.name}")
        log.info("Python archive %s unpacked for the UDFs as %s/", location, target or path.name)
    _WORKER = (tuple(paths), bool(archives))
    if spark is not None and "PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE" in udf.model_fields_set:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(udf.PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE))
    functions = []
    for location in udf.PYTHON_FILES:
        path = _fetch(location, workdir, "PYTHON_FILES")
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


#: the archive suffixes Spark unpacks (SparkContext.addArchive)
_ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar", ".jar")
#: where the installed requirements are unpacked on executors, under SparkFiles' root
REQUIREMENTS_DIR = "dagger-requirements"
#: (directories under SparkFiles' root to import from, whether the UDFs run in SparkFiles' root), set on the driver
_WORKER: tuple[tuple[str, ...], bool] = ((), False)
_prepared = False


def _prepare_worker(paths: tuple[str, ...], in_files_root: bool) -> None:
    """Once per Python worker, before a user UDF runs: the shipped requirements on ``sys.path``, and the working
    directory where the archives were unpacked."""
    global _prepared  # noqa: PLW0603
    if _prepared:
        return

    from pyspark import SparkFiles

    root = SparkFiles.getRootDirectory()
    for name in paths:
        if os.path.join(root, name) not in sys.path:
            sys.path.insert(0, os.path.join(root, name))
    if in_files_root:
        os.chdir(root)
    _prepared = True


def _deferred(func: Any, paths: tuple[str, ...], in_files_root: bool) -> Any:
    """``func`` unpickled in the worker only after :func:`_prepare_worker`: a UDF file that imports a package from
    PYTHON_REQUIREMENTS at its top would otherwise fail to unpickle before the package is on ``sys.path``."""
    from pyspark import cloudpickle

    payload = cloudpickle.dumps(func)
    loaded: list[Any] = []

    def call(*args: Any) -> Any:
        if not loaded:
            _prepare_worker(paths, in_files_root)
            loaded.append(cloudpickle.loads(payload))
        return loaded[0](*args)

    return call


def cache_dir() -> Path:
    """Where installed requirements are kept between runs (``DAGGER_CACHE_DIR``, else ``~/.cache/dagger``)."""

    return Path(os.environ.get("DAGGER_CACHE_DIR") or Path.home() / ".cache" / "dagger")


def install_requirements(requirements: Path) -> Path:
    """``pip install --target`` of a requirements file into a directory named by its content (and this Python's
    version and platform): installed once, reused by every later start with the same file."""

    content = requirements.read_bytes()
    key = hashlib.sha256(content + f"{sys.version_info[:2]}{platform.machine()}".encode()).hexdigest()[:16]
    target = cache_dir() / "requirements" / key
    if (target / ".complete").exists():
        log.info("PYTHON_REQUIREMENTS: %s already installed in %s", requirements.name, target)
        return target
    staging = target.with_name(f"{key}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    log.info("PYTHON_REQUIREMENTS: installing %s into %s", requirements.name, target)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--target", str(staging), "--no-input",
         "--disable-pip-version-check", "--quiet", "--retries", "1", "--timeout", "15", "-r", str(requirements)],
        capture_output=True,
        text=True,
        timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-2:]
        raise DaggerConfigError(
            f"PYTHON_UDF_CONFIG.PYTHON_REQUIREMENTS: pip could not install {requirements.name}: "
            + " ".join(errors)[:600]
            + " (is the package index reachable? pip reads PIP_INDEX_URL and the file's own --index-url / "
            "--find-links)"
        )
    (staging / ".complete").write_text("")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _packed(installed: Path) -> Path:
    """The installed requirements as one archive for executors (made once per installation)."""

    archive = installed.with_suffix(".zip")
    if not archive.exists():
        made = shutil.make_archive(str(installed.with_suffix(".tmp")), "zip", installed)
        Path(made).rename(archive)
    return archive


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

    call = _deferred(func, *_WORKER) if any(_WORKER) else func

    def named(*args: Any) -> Any:
        try:
            if kind is None:
                args = tuple(
                    c(a) if c is not None and a is not None else a
                    for c, a in zip(converters + [None] * len(args), args, strict=False)
                )
            return call(*args)
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
