"""The driver JVM's class-data archive: Spark's classes loaded from a memory-mapped archive instead of its jars.

A local job's JVM loads ~16,000 classes from Spark's jars before its first micro-batch, verifying and parsing
each: most of the ~6 s the session takes to start on a 2-core machine. Java's class data sharing (AppCDS) keeps
them, already parsed, verified and linked, in an archive the next JVM maps from disk: ``dagger validate`` went
from 8.7 to 5.2 s, and a run's first output from 10.8 to 6.9 s, with an archive made once.

How it is made and used (local masters only; under ``spark-submit`` the JVM is started before dagger runs):

* a session started without an archive runs its JVM with ``-XX:ArchiveClassesAtExit`` naming a partial file;
  when the Python process exits, :func:`_finish` closes the JVM's stdin (it exits, as it does anyway once its
  Python driver is gone), waits while it writes the archive (~5 s, ~150 MB, once per machine) and renames the
  file into place after a clean exit. (A dump at run time, ``jcmd VM.cds dynamic_dump``, skips every class not
  yet linked: 3,700 of Spark's, and start-ups gained half as much.)
* later sessions start with ``-XX:SharedArchiveFile`` naming it. The archive is named after what it depends on
  (the Java runtime, Spark's jars, extra class paths), so a changed installation makes a new one; a JVM that
  cannot use an archive ignores it and runs as without.

``DAGGER_CLASS_CACHE=0`` turns both off; ``DAGGER_CLASS_CACHE=read`` uses an archive but never writes one (a
container whose cache directory does not outlive it would pay the writing at every stop and gain nothing).
The archive lives in ``DAGGER_NATIVE_CACHE`` (default ``~/.cache/dagger-on-spark``) with the other built helpers.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from dagger.cache import cache_dir

log = logging.getLogger("dagger")

MODE_ENV = "DAGGER_CLASS_CACHE"
#: the JVM's own CDS messages (classes it cannot archive, an archive it cannot map) are not the user's concern
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
STALE_SECONDS = 3600  # a partial archive this old was left by a process that died before finishing it
#: how long an exiting process waits for its JVM to write the archive: 5-12 s on a quiet 2-core machine, 22 s seen
#: on a slower one (where a 15 s wait never let it finish, so every stop waited 15 s and no start-up gained)
EXIT_TIMEOUT = 60.0
_PENDING: list[tuple[Path, Path]] = []  # (partial, archive) this process's JVM writes at its exit


def mode() -> str:
    """``on`` (use, and write once), ``read`` (use only) or ``off``, from ``DAGGER_CLASS_CACHE``."""
    value = os.environ.get(MODE_ENV, "1").strip().lower()
    if value in ("0", "off", "false", "no"):
        return "off"
    return "read" if value == "read" else "on"


def archive_path(class_path: str = "") -> Path | None:
    """The archive for this Java runtime, pyspark's jars and ``class_path`` (the session's extra class path),
    or ``None`` without a Java runtime or jars to name it after."""
    java = _java()
    jars_dir = _jars_dir()
    if java is None or jars_dir is None:
        return None
    digest = hashlib.sha256()
    for part in (java, *sorted(str(j) for j in jars_dir.glob("*.jar")), class_path):
        digest.update(part.encode())
        try:
            stat = os.stat(part) if part else None
        except OSError:
            stat = None
        if stat is not None:
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return cache_dir() / f"spark-classes-{digest.hexdigest()[:16]}.jsa"


def java_options(class_path: str = "") -> str:
    """Options for a local session's driver JVM, which this process is about to start: map the archive when
    there is one, else (unless only reading) write it at exit (:func:`watch` then waits for it); empty when off.
    """
    if mode() == "off":
        return ""
    archive = archive_path(class_path)
    if archive is None:
        return ""
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    if mode() == "read":
        return ""
    _remove_stale(archive)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.{time.monotonic_ns()}.partial")
    _PENDING[:] = [(partial, archive)]
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}"


def watch(spark: Any) -> None:
    """After the session :func:`java_options` configured has started: at this process's exit, let its JVM
    write the archive and put it in place (:func:`finish`)."""
    if not _PENDING:
        return
    partial, archive = _PENDING.pop()
    proc = getattr(spark.sparkContext._gateway, "proc", None)  # the JVM PySpark launched (None: not ours)
    if proc is None:
        return
    archive.parent.mkdir(parents=True, exist_ok=True)
    atexit.register(_at_exit, proc, partial, archive)


def _at_exit(proc: subprocess.Popen, partial: Path, archive: Path) -> None:
    """At the driver's exit: quiet PySpark's accumulator server, then :func:`finish`."""
    _stop_accumulator_server()
    finish(proc, partial, archive)


def finish(proc: subprocess.Popen, partial: Path, archive: Path, timeout: float = EXIT_TIMEOUT) -> bool:
    """Close the JVM's stdin (it exits when its Python driver is gone), wait while it writes ``partial``, and
    rename it to ``archive`` after a clean exit; a JVM that fails or takes too long leaves no archive."""
    began = time.monotonic()
    # at debug level: the process is exiting, and its last line must stay the job's own (a failure's cause)
    log.debug("saving Spark's classes for faster start-ups (once per installation, up to %.0f s): %s", timeout, archive)
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        code = proc.wait(timeout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        proc.kill()  # its partial archive is worth nothing: never wait longer than a stop may take
        proc.wait()
        code = None
    written = code == 0 and partial.exists() and partial.stat().st_size > 0
    try:
        if written:
            os.replace(partial, archive)
        else:
            partial.unlink(missing_ok=True)
    except OSError:
        return False
    if written:
        log.debug(
            "Spark's classes saved in %.1f s (%d MB); later start-ups map them",
            time.monotonic() - began,
            archive.stat().st_size // 2**20,
        )
    return written


def _stop_accumulator_server() -> None:
    """Stop PySpark's accumulator server before the JVM goes: its handler reads the JVM's connection and prints an
    ``EOFError`` traceback when that closes under it, which would be the last thing a stopping job prints. It
    notices the stop within its 1 s poll."""
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        server = getattr(context, "_accumulatorServer", None)
        if server is not None:
            server.shutdown()
            context._accumulatorServer = None  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a clean-up at exit: the archive matters more than a quiet log
        pass


def _remove_stale(archive: Path) -> None:
    """Remove partial archives left by processes that died before renaming them."""
    now = time.time()
    for stale in archive.parent.glob(f"{archive.name}.*.partial"):
        try:
            if now - stale.stat().st_mtime > STALE_SECONDS:
                stale.unlink()
        except OSError:
            continue


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def _jars_dir() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    return jars if jars.is_dir() else None
