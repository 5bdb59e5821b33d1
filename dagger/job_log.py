"""The job's log file: every log line of a run, the JVM's and the driver's, with their full stack traces.

On the console a run shows one line per event and, when it fails, the cause last; the traces behind it (Spark's
``MicroBatchExecution … terminated with error`` and its frames, a task's Python traceback) go to the log file,
and one line before the cause says where. ``--verbose`` prints them on the console instead, as Spark does.

The file is ``dagger run --log-file``, else ``$DAGGER_LOG_FILE``, else ``<tmp>/dagger/<job>.log``; a run starts
it afresh. The JVM writes to it through ``dagger/log4j2.properties`` (a job that sets its own
``log4j2.configurationFile`` keeps its own), the driver's Python through a handler on the root logger.
"""

from __future__ import annotations

import logging
import os
import tempfile
import traceback
from pathlib import Path

#: the environment variable that names the log file: the JVM's settings (dagger.session.spark) read it
ENV = "DAGGER_LOG_FILE"
#: set by ``--verbose``: Spark's own logging, with its traces on the console
VERBOSE_ENV = "DAGGER_VERBOSE"
#: the JVM's logging configuration for a run
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def default_path(job_slug: str) -> Path:
    """Where a job's log goes when nothing says otherwise."""
    return Path(tempfile.gettempdir()) / "dagger" / f"{job_slug}.log"


def start(path: str | Path, verbose: bool) -> Path:
    """Start the run's log file at ``path`` (emptied) and send the driver's log lines there too, at DEBUG."""
    target = Path(path).expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("")
    os.environ[ENV] = str(target)
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
    handler = logging.FileHandler(target, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    for console in root.handlers:
        if not verbose and console.formatter is not None:  # the console: a line per event, the file the traces
            console.setFormatter(_WithoutTraces(console.formatter._fmt, console.formatter.datefmt))
    root.addHandler(handler)
    if not verbose:  # PySpark logs a failed query's SQL context as JSON, with its trace, to the console
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).handlers = [handler]  # not addHandler: that makes the lines JSON
    return target


class _WithoutTraces(logging.Formatter):
    """The console's format: a record without its exception's trace (the log file has it)."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def path() -> Path | None:
    """The run's log file (None outside ``dagger run``)."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def write_trace(what: str) -> None:
    """Append the exception being handled, with its trace, to the log file (not the console)."""

    target = path()
    if target is not None:
        with target.open("a", encoding="utf-8") as out:
            out.write(f"{what}\n{traceback.format_exc()}")


def where() -> str | None:
    """The line that says where the traces are (None when they are on the console, or there is no file)."""
    target = path()
    if target is None or os.environ.get(VERBOSE_ENV):
        return None
    return f"the full traces are in {target} (dagger run --verbose prints them here)"


def jvm_options() -> str | None:
    """The driver JVM's options that send its logging to the run's log file (None: Spark's own logging)."""
    target = path()
    if target is None or os.environ.get(VERBOSE_ENV):
        return None
    return f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()} -Ddagger.log.file={target}"


def reconfigure_jvm(jvm: object) -> None:
    """Apply the run's logging to a JVM that started without it (under ``spark-submit``)."""
    target = path()
    if target is None or os.environ.get(VERBOSE_ENV):
        return
    system = jvm.java.lang.System  # type: ignore[attr-defined]
    if system.getProperty("log4j2.configurationFile") or system.getProperty("log4j.configurationFile"):
        return  # the job's own logging configuration
    system.setProperty("dagger.log.file", str(target))
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator  # type: ignore[attr-defined]
    configurator.reconfigure(jvm.java.net.URI(LOG4J2_PROPERTIES.as_uri()))
