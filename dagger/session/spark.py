"""Creating the Spark session a job runs in."""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger import job_log
from dagger.cache import cache_dir
from dagger.errors import DaggerConfigError
from dagger.session import class_data, forkserver, jars, pandas_free

if TYPE_CHECKING:
    from dagger.config.model import JobConfig

DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.python.daemon.module": "dagger.session.daemon",  # workers forked with pyarrow, ptars, ... loaded
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}


def session_conf(config: JobConfig, local_master: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark settings a job's session gets: the runner's defaults, one shuffle partition per core in local
    mode (``local_master``), ``FLINK_PARALLELISM`` as the task counts when set, ``extra``, then ``SPARK_CONF``."""
    conf = dict(DEFAULT_CONF)
    if local_master is not None:
        # one shuffle (and state store) partition per core: each costs a task and a state delta file per batch
        conf["spark.sql.shuffle.partitions"] = str(local_cores(local_master))
    if "FLINK_PARALLELISM" in config.model_fields_set:  # Dagger's operator parallelism: Spark's task counts
        conf["spark.sql.shuffle.partitions"] = str(config.FLINK_PARALLELISM)
        conf["spark.default.parallelism"] = str(config.FLINK_PARALLELISM)
    if config.SPARK_TRIGGER_MODE == "real-time":  # real-time mode turns adaptive execution off, with a warning each
        conf["spark.sql.adaptive.enabled"] = "false"
    conf.update(extra or {})
    conf.update(config.SPARK_CONF)
    return conf


#: Hadoop's local file system, checksummed as Hadoop's own, that sets permissions with a system call where Hadoop
#: (without its native library, which pyspark does not ship) runs a ``chmod`` process for every file it creates:
#: each checkpoint offset and commit file, its ``.crc``, each state store delta. A file's create and close from
#: the driver took 14.5 ms through Hadoop's and 2.7 through this one, both with the same 0644 modes
#: (``dagger/jvm/LocalFileSystem.java``)
LOCAL_FILE_SYSTEM = {"spark.hadoop.fs.file.impl": "dagger.hadoop.LocalFileSystem"}


def local_settings() -> dict[str, str]:
    """What a local session gets below the job's settings: the connectors' jars on the driver's class path and,
    where our helper jar is among them, :data:`LOCAL_FILE_SYSTEM`."""
    settings = jars.session_settings()
    if jars.helper_name() in settings.get("spark.driver.extraClassPath", ""):
        settings.update(LOCAL_FILE_SYSTEM)
    return settings


def get_session(config: JobConfig, extra: dict[str, str] | None = None) -> Any:
    """A SparkSession for ``config``: the one spark-submit created, or a local one on all cores."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("TZ", "UTC")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    pandas_free.install()  # before the first py4j call (SparkConf): PySpark's converters import pandas
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(config.FLINK_JOB_ID)
    # under spark-submit the JVM is already up (PYSPARK_GATEWAY_PORT): its --master and --conf win
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if submitted:
        SparkContext._ensure_initialized()
    given = SparkConf()  # spark-submit's settings once the gateway is initialised, else spark-defaults
    if not given.contains("spark.master"):
        builder = builder.master(config.SPARK_MASTER)
    master = given.get("spark.master", config.SPARK_MASTER)
    local = not submitted and master.startswith("local")
    # a real-time query runs no Python (dagger.kafka.spark_connector), nor does a job that asks for Spark's Kafka connector (it
    # runs on it or is refused): no fork server, whose daemons would idle beside the JVM
    jvm_only = config.SPARK_TRIGGER_MODE == "real-time" or config.SPARK_KAFKA_CONNECTOR in ("spark", "jvm")
    if local and not given.contains("spark.pyspark.python") and not jvm_only:
        # auto: the planning says whether the records meet Python (dagger.job.start starts the server then)
        use_worker_python(defer=config.SPARK_KAFKA_CONNECTOR == "auto")
    conf = session_conf(config, master if local else None, extra)
    if local:  # Spark's Kafka connector and spark-avro (make install caches them); the job's settings win
        conf = {**local_settings(), **conf}
    if local:  # the driver JVM starts here: Spark's classes from the class-data archive, its logging to the log file
        extra_classes = [conf[k] for k in ("spark.driver.extraClassPath", "spark.jars") if conf.get(k)]
        cds = class_data.java_options(",".join(extra_classes))
        options = conf.get("spark.driver.extraJavaOptions", "")
        logs = None if "log4j" in options else job_log.jvm_options()
        conf["spark.driver.extraJavaOptions"] = " ".join(o for o in (options, cds, logs) if o)
    for key, value in conf.items():
        if not (submitted and given.contains(key)):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if submitted:
        job_log.reconfigure_jvm(spark._jvm)
    class_data.watch(spark)
    spark.sparkContext.setLogLevel(os.environ.get("DAGGER_SPARK_LOG_LEVEL", "WARN"))
    driver_side_python(spark.sparkContext.pythonExec)
    return spark


def use_data_source(spark: Any, source: type) -> str:
    """The name of the Python data source ``source``, registered with ``spark`` the first time a query of the
    session uses it: a registration starts a Python worker (Spark 4.2), which a job that reads and writes in the JVM
    alone (Dagger's reader in the JVM, Spark's Kafka sink) never needs."""
    name = source.name()
    if not spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(name):
        spark.dataSource.register(source)
    return name


def driver_side_python(python: str, cwd: str | None = None) -> None:
    """Make the executors' interpreter path resolve on the driver as well.

    With ``PYSPARK_PYTHON=./environment/bin/python`` and ``--archives env.tar.gz#environment`` (PySpark's packed
    environments), the path names the archive executors unpack in their working directory. Spark also starts
    the Python data sources' planners on the driver with that path (``Cannot run program
    "./environment/bin/python"`` at the first read), and the driver has no such directory. Where it is missing,
    ``environment`` in the driver's working directory becomes a link to the driver's own environment, which
    has the same packages; the executors still use what they unpacked.
    """
    path = Path(python)
    if path.is_absolute() or len(path.parts) < 2:  # an absolute path, or a command found on the PATH
        return
    base = Path(cwd or os.getcwd())
    if (base / path).exists():
        return
    link, inside = base / path.parts[0], Path(*path.parts[1:])
    target = Path(sys.prefix)
    if link.exists() or link.is_symlink() or not (target / inside).exists():
        raise DaggerConfigError(
            f"PYSPARK_PYTHON={python} does not exist on the driver (in {base}), and {link} cannot point to this "
            f"environment ({target}); run spark-submit from another directory, or set spark.pyspark.python to "
            "an interpreter path that exists on the driver and the executors"
        )
    link.symlink_to(target, target_is_directory=True)
    logging.getLogger("dagger").info(
        "PYSPARK_PYTHON=%s: %s now points to the driver's environment %s (the executors use the archive they unpack)",
        python,
        link,
        target,
    )


_WRAPPER = """#!/bin/sh
# Written by dagger.session.spark.worker_python: runs {python} for Spark's Python workers without the pyspark.zip and
# py4j zip Spark puts first on their PYTHONPATH. This interpreter has the same pyspark and py4j installed, and
# importing them from a zip compiles ~1,300 modules from source in every fresh worker (~1 s of CPU each).
# Spark's spark-core jar goes too: it holds no Python, and every fresh worker re-reads its 6,000-entry
# directory three times (importlib.invalidate_caches on its first task, ~0.1 s).
kept=""
old_ifs=$IFS
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    {drop}) ;;
    *) kept="${{kept:+$kept:}}$entry" ;;
  esac
done
IFS=$old_ifs
PYTHONPATH=$kept
export PYTHONPATH
# Spark's daemon for the data source workers (create_data_source, the sink runner, ...): dagger's, which forks
# them with pyarrow, pandas and the reader/sink code already imported
if [ "$1" = "-m" ] && [ "$2" = "pyspark.daemon" ] && [ -n "$3" ]; then
  shift 2
  set -- -m dagger.session.daemon "$@"
fi
# a worker daemon, or a streaming query's source runner (started without a daemon): forked from dagger's fork
# server, which has their imports done
if [ "$1" = "-m" ] && [ -n "$DAGGER_FORKSERVER_SOCKET" ]; then
  case "$2" in
    {forked}) exec {python} -I -S {client} --client {python} "$@" ;;
  esac
fi
exec {python} "$@"
"""


_WRAPPER_PREFIX = "worker-python-"


def worker_python() -> str | None:
    """An executable that runs this interpreter for Spark's Python workers, importing pyspark from its installed
    package instead of Spark's ``python/lib/pyspark.zip`` (zip imports are never byte-code cached: each worker
    Spark starts without its daemon, such as a streaming query's source runner, spends ~1 s compiling). It also
    starts the data source workers' daemons as :mod:`dagger.session.daemon` (Spark starts them as
    ``pyspark.daemon`` whatever ``spark.python.daemon.module`` says) and hands the source runner to
    :mod:`dagger.session.forkserver`.

    ``None`` where there is nothing to gain (no zip next to the installed pyspark, py4j not installed as a
    package) or the script cannot be written. Written once to ``DAGGER_NATIVE_CACHE``
    (default ``~/.cache/dagger-on-spark``).
    """
    import py4j
    import pyspark

    lib = Path(pyspark.__file__).resolve().parent / "python" / "lib"
    zips = sorted(str(z) for z in [lib / "pyspark.zip", *lib.glob("py4j-*-src.zip")] if z.exists())
    if not zips or ".zip" in py4j.__file__:
        return None

    jars = sorted(str(j) for j in (lib.parent.parent / "jars").glob("spark-core_*.jar"))
    script = _WRAPPER.format(
        python=shlex.quote(sys.executable),
        drop="|".join(shlex.quote(z) for z in [*zips, *jars]),
        forked="|".join(forkserver.MODULES),
        client=shlex.quote(forkserver.__file__),
    )
    cache = cache_dir()
    target = cache / f"{_WRAPPER_PREFIX}{hashlib.sha256(script.encode()).hexdigest()[:16]}"
    if not target.exists():
        try:
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=cache, delete=False) as handle:
                handle.write(script)
            os.chmod(handle.name, 0o755)
            os.replace(handle.name, target)
        except OSError:
            return None
    return str(target)


def local_cores(master: str) -> int:
    """Task slots of a ``local``, ``local[N]``, ``local[*]`` or ``local[N, retries]`` master."""
    if not master.startswith("local["):
        return 1
    threads = master[len("local[") : -1].split(",")[0].strip()
    if threads == "*":
        return os.cpu_count() or 1
    return max(1, int(threads)) if threads.isdigit() else 1


def use_worker_python(defer: bool = False) -> None:
    """Point ``PYSPARK_PYTHON`` at :func:`worker_python` when the workers would run this very interpreter (a
    local master; ``PYSPARK_PYTHON`` unset or this interpreter). Call before the session starts. ``defer``: the
    fork server's socket is named now (the JVM's workers inherit it) and the server starts only when a query
    needs Python (:func:`start_deferred_forkserver`); a worker asking before that runs a plain interpreter."""
    current = os.environ.get("PYSPARK_PYTHON")
    # a wrapper inherited from a parent process that ran a session (a notebook, the benchmark) is ours too: this
    # process still needs its own fork server (the parent's forks outside this job's process tree, and exits with it)
    inherited = current is not None and Path(current).name.startswith(_WRAPPER_PREFIX)
    if current and not inherited and os.path.abspath(current) != os.path.abspath(sys.executable):
        return
    wrapper = worker_python()
    if wrapper is not None:
        os.environ["PYSPARK_PYTHON"] = wrapper
        start_forkserver(defer)


_FORKSERVER: dict[int, str] = {}  # pid -> socket of the fork server that process started
_DEFERRED: dict[int, str] = {}  # pid -> socket of the fork server that process has named and not started yet


def start_forkserver(defer: bool = False) -> None:
    """Start this process's :mod:`dagger.session.forkserver` (once) and point the worker command at it; its imports run
    while the JVM starts (``defer``: when a query needs it). ``DAGGER_FORKSERVER=0`` turns it off (workers then start
    as plain interpreters)."""

    if os.environ.get("DAGGER_FORKSERVER", "1") == "0":
        os.environ.pop(forkserver.SOCKET_ENV, None)  # not one inherited from a parent process either
        return
    pid = os.getpid()
    path = _FORKSERVER.get(pid) or _DEFERRED.get(pid)
    if path is None:
        if defer:
            path = _DEFERRED[pid] = forkserver.socket_path()
        else:
            path = forkserver.start()
    if path is None:
        os.environ.pop(forkserver.SOCKET_ENV, None)
        return
    if not defer and pid in _DEFERRED:
        path = forkserver.start(_DEFERRED.pop(pid)) or path
    if not defer:
        _FORKSERVER[pid] = path
    os.environ[forkserver.SOCKET_ENV] = path


def start_deferred_forkserver() -> None:
    """Start the fork server a session named and deferred (:func:`use_worker_python`), once a query needs Python
    workers: a job whose records never meet Python (Dagger's reader in the JVM, Spark's Kafka sink) holds none."""
    if os.getpid() in _DEFERRED:
        start_forkserver()
