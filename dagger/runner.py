"""The run of a job: signals, the loop until the query ends, stop conditions, progress and the exit code.

:class:`JobRunner` takes a planned-but-not-started :class:`~dagger.job.Job`, in the shape of
Quix Streams' ``Application.run`` and its run tracker:

* **signals first.** Ctrl-C / SIGTERM handlers are installed when the runner is made, before planning (which can
  take seconds): a signal during planning means the query never starts. The first signal lets the running
  micro-batch finish, then stops; a second one stops at once (the micro-batch is cut short and redone by the next
  run, from the checkpoint).
* **stop conditions.** The query ends by itself (a bounded run, ``--available-now``), fails, or is drained: an
  ``--available-now`` query whose operators ask for batches forever (a processing-time state TTL) is stopped once
  every source is read to its end and the last batches were empty (:func:`is_drained`).
* **progress** every ``progress_interval`` seconds and a final summary (:mod:`dagger.progress`); the final offsets
  are committed to the consumer groups; the exit code is 0 for a clean end and 1 for a failed query.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from dagger import job_log
from dagger.errors import SinkError, SourceError
from dagger.progress import ProgressReporter
from dagger.schema.refresh import DescriptorWatcher
from dagger.telemetry import Telemetry

if TYPE_CHECKING:
    from dagger.job import Job

log = logging.getLogger("dagger")


class JobRunner:
    """Runs one job to its end. Parameters: the job (a :class:`~dagger.job.Job`) and how
    often to log progress, in seconds."""

    def __init__(self, job: Job, progress_interval: float = 10.0):
        self.job = job
        self.progress_interval = progress_interval
        self.progress: ProgressReporter | None = None  # a view of the telemetry's metrics, made by run()
        self.query: Any = None
        self.telemetry: Telemetry | None = None
        self.exit_code: int | None = None
        self.failure: str | None = None  # the root message of the query's failure
        self._traced = False  # the failure has traces (the query's), in the log file
        self._stop = threading.Event()
        self._at_once = threading.Event()
        self._install_signal_handlers()

    def request_stop(self, at_once: bool = False) -> None:
        """Stop after the running micro-batch (``at_once``: without waiting for it)."""
        if at_once:
            self._at_once.set()
        self._stop.set()

    def run(self) -> int:
        """Plan, start and run the job; returns the process exit code (0 on a clean end)."""
        telemetry = self.telemetry = Telemetry(self.job)  # scrapeable (dagger_up 0) while the job plans
        self.progress = ProgressReporter(telemetry.metrics)
        failed = False
        try:
            return self._run(telemetry)
        except BaseException:
            failed = True
            raise
        finally:
            telemetry.close(failed=failed or self.exit_code == 1)
            if self.failure is not None:
                where = job_log.where() if self._traced else None
                if where:
                    log.info(where)
                log.error("query failed: %s", self.failure)

    def _run(self, telemetry: Telemetry) -> int:
        from pyspark.errors import StreamingQueryException

        job = self.job
        reached = _FirstContact(job)  # sources and sinks asked while the session starts (seconds of the JVM)
        try:
            job.spark  # noqa: B018 - the session: PySpark's SparkContext installs a SIGINT handler of its own,
            self._install_signal_handlers()  # (cancel every job, raise KeyboardInterrupt); ours replace it
            plan = job.validate()
            reached.wait()
        except KeyboardInterrupt:
            log.info("stopped while planning: nothing was read")
            return 0
        except (SourceError, SinkError) as exc:  # a server that never answered: said as a failed query is
            self.failure = f"{type(exc).__name__}: {exc}"
            self.exit_code = 1
            return 1
        if self._stop.is_set():
            log.info("stopped before the query started: nothing was read")
            return 0
        if job.options.available_now and job.bounded:
            log.info("the input is bounded: --available-now changes nothing (the run reads it all and stops)")
        query = self.query = job.start(plan)
        telemetry.attach()
        last_report = time.monotonic()
        refresh = job.refresh_seconds
        watcher = DescriptorWatcher(job.fetch_descriptors, refresh) if refresh else None
        try:
            while query.isActive:
                if watcher is not None and watcher.fresh is not None:
                    query = self.query = self._switch_descriptors(query, watcher.take(), telemetry)
                    continue
                if self._stop.is_set():
                    self._stop_between_batches(query)
                    break
                if job.options.available_now and not job.bounded and is_drained(query):
                    log.info("every source is read to its end and the last batches were empty: stopping")
                    self._stop_between_batches(query)
                    break
                try:
                    query.awaitTermination(0.5)
                except StreamingQueryException:
                    break  # reported below from query.exception()
                telemetry.poll(query)
                job.after_batches(query)
                if time.monotonic() - last_report >= self.progress_interval:
                    self.progress.report(query)
                    last_report = time.monotonic()
        finally:
            if watcher is not None:
                watcher.close()
            if job.bounded:
                if query.lastProgress:
                    telemetry.metrics.record_bounded(query.lastProgress, job.counters.inputs)
            else:
                telemetry.poll(query)  # the last batches
            self.progress.report(query, final=True)
        job.finish(query)
        if self.failure is not None:  # stopped by the runner: descriptors changed incompatibly
            self.exit_code = 1
            return 1
        exc = query.exception()
        if exc is not None:
            telemetry.fatal(exception_type(exc))
            self.failure = job.explain_failure(root_message(exc))  # logged last, after telemetry's shutdown wait
            self._traced = True  # Spark's report of it, with the traces, is in the log file
            self.exit_code = 1
            return 1
        self.exit_code = 0
        return 0

    def _switch_descriptors(self, query: Any, fresh: Any, telemetry: Telemetry) -> Any:
        """Run the query with ``fresh`` descriptor sets: a compatible change restarts it from its checkpoint after
        the running micro-batch (returns the new query); an incompatible one stops it (the job then exits 1)."""
        job = self.job
        old = job.descriptors.sha256[:12]
        problems, added = job.descriptor_changes(fresh)
        if problems:
            self._stop_between_batches(query)
            self.failure = (
                f"the descriptor sets changed incompatibly while the job ran (sha256 {old} -> {fresh.sha256[:12]}): "
                + "; ".join(problems)
                + ". Restore the field, or start the changed job with a new checkpoint directory."
            )
            return query
        log.info(
            "descriptor sets changed compatibly (sha256 %s -> %s%s): restarting the query from its checkpoint "
            "after the running micro-batch to use them",
            old,
            fresh.sha256[:12],
            f"; new fields {', '.join(added)}" if added else "",
        )
        self._stop_between_batches(query)
        job.adopt_descriptors(fresh)
        restarted = job.start(job.validate())
        telemetry.poll(query)  # the stopped query's last batches
        telemetry.attach()
        log.info("the query runs again, with descriptor sets sha256 %s", fresh.sha256[:12])
        return restarted

    def _stop_between_batches(self, query: Any, timeout: float = 120.0) -> None:
        self.job.query = query
        self.job.stop(at_once=self._at_once.is_set, timeout=timeout)

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if self._stop.is_set():
            log.warning("received %s again: stopping at once", name)
            self.request_stop(at_once=True)
            if self.query is None:
                raise KeyboardInterrupt  # still planning: abandon it
            return
        if getattr(self.job, "real_time", False):
            log.info("received %s: stopping", name)
        else:
            log.info("received %s: finishing the current micro-batch, then stopping (again to stop at once)", name)
        self.request_stop()


class _FirstContact:
    """:meth:`~dagger.job.Job.reach` in a thread of its own (a daemon: an interrupted start does not wait for
    it); :meth:`wait` raises what it raised."""

    def __init__(self, job: Job):
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(job,), name="first-contact", daemon=True)
        self.thread.start()

    def _run(self, job: Job) -> None:
        try:
            job.reach()
        except BaseException as exc:  # noqa: BLE001 - handed to wait()
            self.error = exc

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def is_drained(query: Any, empty_batches: int = 3) -> bool:
    """An ``--available-now`` query that keeps running batches after reading everything: the last
    ``empty_batches`` batches read no row and every source's offset is its latest.

    Spark ends such a query itself, except when an operator asks for batches forever: a processing-time state
    TTL (``DeDuplicationTransformer``) does.
    """
    progress = list(query.recentProgress or [])[-empty_batches:]
    if len(progress) < empty_batches or any(p.get("numInputRows") for p in progress):
        return False
    return all(
        s.get("latestOffset") is not None and s.get("endOffset") == s.get("latestOffset")
        for s in progress[-1].get("sources", [])
    )


def exception_type(exc: BaseException) -> str:
    """The most specific type of a (possibly JVM-wrapped) streaming failure: ours (``InvalidRecordError``,
    ``SinkError`` ...) when the text names one, else the JVM's exception class, else the Python type."""
    message = root_message(exc)
    if ":" in message and message.split(":", 1)[0].isidentifier():
        return message.split(":", 1)[0]
    found = re.search(r"\b((?:[a-z0-9_]+\.)+([A-Z][A-Za-z0-9_]*(?:Exception|Error)))\b", str(exc))
    return found.group(2) if found else type(exc).__name__


#: a line of a Python traceback that Spark wraps, naming one of our errors: ``dagger.errors.SourceError: …``
_OUR_ERROR = re.compile(r"^(?:dagger|udfs)(?:\.\w+)*\.([A-Z]\w*(?:Error|Exception))_?: (.+)$", re.MULTILINE)


#: the exception line that ends a Python traceback (the first unindented ``name: message`` line after it)
_PYTHON_ERROR = re.compile(
    r"Traceback \(most recent call last\):\n(?:[ \t].*\n|\n)*?([A-Za-z_][\w.]*(?:Error|Exception|Warning)): (.+)"
)


_RAISED = re.compile(r"(?:^|\] |: )(InvalidRecordError|SinkError|SchemaRegistryError|DaggerError): (.*)", re.MULTILINE)


#: a ``Caused by:`` line of a JVM stack trace Spark prints with a task's failure
_JVM_CAUSE = re.compile(r"^Caused by: ((?:[\w$]+\.)*[\w$]+): (.+)$", re.MULTILINE)


def root_message(exc: BaseException) -> str:
    """The most specific line of a (possibly JVM-wrapped) streaming failure: our own error where a Spark task or
    a Python data source raised one (the first, the cause, when a traceback chains several), else the first
    line of the text."""
    text = str(exc)
    found = _OUR_ERROR.search(text)
    if found:
        return f"{found.group(1)}: {found.group(2).strip()}"
    raised = _PYTHON_ERROR.search(text)  # a user's function (a UDF) raised: its own exception line
    if raised:
        return f"{raised.group(1).rsplit('.', 1)[-1]}: {raised.group(2).strip()}"
    # raised in the JVM by raise_error(): "[USER_RAISED_EXCEPTION] InvalidRecordError: ..." (the same words inside
    # a plan the error prints are the expression's text, not the error)
    raised = _RAISED.search(text)
    if raised:
        tail = re.sub(r"\s*SQLSTATE: \w+\.?$", "", raised.group(2).strip())
        return f"{raised.group(1)}: {tail}"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    causes = _JVM_CAUSE.findall(text)  # a JVM exception's chain: its deepest cause says what went wrong
    if causes:
        kind, message = causes[-1]
        cause = f"{kind.rsplit('.', 1)[-1]}: {message.strip()}"
        if message.strip() and message.strip() not in first:
            return f"{first}; caused by {cause}"
    return first
