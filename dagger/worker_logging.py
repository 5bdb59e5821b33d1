"""The log lines of the job's Python code that runs in Spark's Python processes, formatted as the driver's.

The planning of a Python data source (our Kafka reader's offsets, group commits) runs in Spark's streaming
source runner, and reading and writing in Python workers: processes the JVM starts, where nobody configures
:mod:`logging`. Their warnings reached the job's log through Python's last-resort handler as bare messages, with
no time, level or logger (``stream 't': committing offsets to group g failed: …``), among the driver's
formatted lines. :func:`setup` gives the ``dagger`` loggers of such a process the driver's format, at WARNING
(what the last-resort handler showed before: a worker's INFO lines would repeat per task).
"""

from __future__ import annotations

import logging
import os
import sys

#: the format of the job's log lines, the driver's (dagger.cli) and those of Spark's Python processes
FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"
DATE_FORMAT = "%H:%M:%S"


def in_spark_worker() -> bool:
    """Whether this process was started by Spark's JVM for Python work (a daemon, a worker, a source runner)."""
    return "PYTHON_WORKER_FACTORY_SECRET" in os.environ


def setup() -> None:
    """A formatted handler on the ``dagger`` logger (once per process; not in the driver)."""
    logger = logging.getLogger("dagger")
    if any(getattr(h, "_dagger_worker", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT, datefmt=DATE_FORMAT))
    handler.setLevel(logging.WARNING)
    handler._dagger_worker = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False  # a handler on the root logger of the process would print each line twice


def setup_if_worker() -> None:
    """:func:`setup` in a process Spark started: at the import of :mod:`dagger`, and in each child of the fork
    server (:mod:`dagger.session.forkserver`), which imported :mod:`dagger` before Spark's environment was its own."""
    if in_spark_worker():
        setup()
