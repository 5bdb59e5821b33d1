"""One run of ``dagger test``: a Spark session for every case, and each case run through the job's own path
(runs on the driver, in the ``dagger test`` process).

A case's records are encoded with each stream's schema (:mod:`dagger.testing.records`) and read by the stream's
own decoding from memory (:class:`~dagger.kafka.source.memory.MemorySource`); the job is planned and started as
``dagger run`` plans and starts it, with :class:`~dagger.job.fixtures.JobFixtures` standing in for the brokers
and destinations; each sink's encoder writes and its records are read back (:mod:`dagger.testing.decoding`) and
compared with the case's (:mod:`dagger.testing.matching`). ``MODE: bounded`` is one batch query, in which every
window with data closes; ``MODE: streaming`` runs one micro-batch per ``INPUT_BATCHES`` entry, and the watermark
moves between them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger.config.instants import parse_instant
from dagger.errors import DaggerConfigError
from dagger.longbow.bigtable import row_key
from dagger.longbow.classic import table_name
from dagger.longbow.memory import MemoryStore
from dagger.session.spark import DEFAULT_CONF, get_session
from dagger.testing.loading import CaseFileError, case_config, check_case
from dagger.testing.matching import Rules, compare, in_expected_order, only_compared
from dagger.testing.subjects import subject_blobs
from dagger.testing.verdict import Observed, collect, count, dead_letters, judge

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.cases import CaseConfig
    from dagger.config.model import JobConfig
    from dagger.job import Job
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger("dagger.testing")

#: how long a case may run before it fails (a streaming query that never drains)
CASE_TIMEOUT_S = 300.0

#: the driver JVM's options for test runs, which last seconds: the JIT's first tier only (C2 compiles code that a
#: short run hardly uses again: a file of 10 cases took 16.6 s from launch in place of 19.0 s, back to back;
#: docs/testing.md, "How fast")
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


@dataclass
class Outcome:
    """What became of one case."""

    name: str
    passed: bool
    seconds: float
    #: why it failed: the diff, or the error
    lines: list[str] = field(default_factory=list)
    #: what each sink wrote (by the case's EXPECTED key: ``SINK`` or the sink's name), for ``--update``
    written: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the failure's last line, when the job failed
    error: str | None = None
    #: dead letters, undecodable and late records, as counted (``--update``)
    counts: dict[str, int] = field(default_factory=dict)


class Harness:
    """Runs the cases of one job config, one after the other, in one Spark session."""

    def __init__(self, config_path: str, overrides: list[str] | None = None):
        self.config_path = config_path
        self.overrides = list(overrides or [])
        self._spark: SparkSession | None = None
        self._descriptors: dict[str, DescriptorSet] = {}
        self._root = Path(tempfile.mkdtemp(prefix="dagger-test-", dir=_scratch()))

    def real_time(self) -> bool:
        """Whether the job runs in Spark's real-time mode (its cases run as micro-batches all the same)."""
        from dagger.job import load_config  # start-up: loads fastavro, google, pyarrow, pyspark, udfs

        try:
            return load_config(self.config_path, self.overrides).SPARK_TRIGGER_MODE == "real-time"
        except DaggerConfigError:
            return False  # said by the first case that loads it

    def close(self) -> None:
        """Leave nothing behind (the session stays for whoever else uses it in this process)."""
        shutil.rmtree(self._root, ignore_errors=True)

    def run(self, case: CaseConfig, restore_check: bool = False) -> Outcome:
        """Run ``case``; a case that cannot run as written raises :class:`CaseFileError`. With
        ``restore_check``, a streaming case runs twice more (:meth:`_restore_check`) and must write the same."""
        started = time.monotonic()
        config = case_config(self.config_path, self.overrides, case)
        check_case(config, case)
        batches = case.INPUT_BATCHES if case.INPUT_BATCHES is not None else [case.INPUT or {}]
        streaming = case.MODE == "streaming"
        with self._directory() as directory:
            observed = self._observe(config, case, directory, batches, fresh_workers=restore_check and streaming)
        lines = judge(case, observed)
        if restore_check and streaming and observed.error is None:
            lines += self._restore_check(config, case, batches, observed)
        if lines:  # what --update writes into a failed case: the records in the order the case gives them, where
            # they match, with only the fields a PARTIAL case compares

            rules = Rules(case.ORDERED, case.PARTIAL, case.TOLERANCE)
            for key, records in observed.written.items():
                expected = observed.expected.get(key, [])
                records = records if case.ORDERED else in_expected_order(expected, records, rules)
                observed.written[key] = only_compared(expected, records) if case.PARTIAL else records
        counts = {"dead_letters": observed.dead_letters, "invalid": observed.invalid, "late": observed.late}
        seconds = time.monotonic() - started
        return Outcome(case.NAME, not lines, seconds, lines, observed.written, observed.error, counts)

    def _restore_check(self, config: JobConfig, case: CaseConfig, batches: list[dict], whole: Observed) -> list[str]:
        """Arroyo's check: the case run again (1) stopped after every micro-batch and restarted from its
        checkpoint, with fresh Python workers as a new process has, and (2) with every record in a micro-batch
        of its own; each must write what the uninterrupted run wrote."""

        single = [{table: [record]} for batch in batches for table, records in batch.items() for record in records]
        reruns = (
            ("stopped after every micro-batch and restarted from its checkpoint", batches, True),
            ("with every record in a micro-batch of its own", single, False),
        )
        lines = []
        for how, rerun_batches, restarts in reruns:
            with self._directory() as directory:
                rerun = self._observe(config, case, directory, rerun_batches, True, restarts)
            if rerun.error is not None:
                lines += [f"restore check: run {how}, the job failed:", f"  {rerun.error}"]
                continue
            for sink, records in whole.written.items():
                diff = compare(records, rerun.written.get(sink, []), Rules(False, False, case.TOLERANCE))
                if not diff.ok:
                    lines += [f"restore check: run {how}, sink {sink} wrote other records than in one run:"]
                    lines += [line.replace("expected", "in one run").replace("got", "now") for line in diff.lines()]
            # the same batches restarted drop the same records as late; records read one by one may not (the
            # watermark moves after each), and then their windows' output tells
            counts = [("dead letters", "dead_letters"), ("undecodable records", "invalid")]
            for name, what in counts + ([("late records", "late")] if restarts else []):
                before, now = getattr(whole, what), getattr(rerun, what)
                if before != now:
                    lines.append(f"restore check: run {how}, {name}: in one run {before}, now {now}")
        return lines

    @contextlib.contextmanager
    def _directory(self) -> Iterator[str]:
        """A directory of the case's own, removed after it."""
        directory = self._root / f"run-{uuid.uuid4().hex[:8]}"
        try:
            yield str(directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    # -- running -------------------------------------------------------------------------------------------

    def _session(self, config: JobConfig) -> SparkSession:
        if self._spark is None:
            java = f"{DEFAULT_CONF['spark.driver.extraJavaOptions']} {TEST_JAVA_OPTIONS}"
            # no UI either: its web server's start, and each query's pages (~0.5 s a run); SPARK_CONF still wins
            self._spark = get_session(config, {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": java})
            self._spark.sparkContext.setLogLevel("ERROR")
        return self._spark

    def _descriptor_set(self, config: JobConfig, case: CaseConfig) -> DescriptorSet:
        """The job's descriptor sets (fetched once for every case with the same Stencil URLs), with the case's
        registry subjects in place of the registry's."""
        from dagger.schema.descriptor_sets import (  # start-up: loads google
            DescriptorSet,
            SchemaRegistry,
            StencilSettings,
        )

        settings = StencilSettings.from_config(config)
        key = json.dumps(settings.urls)
        if key not in self._descriptors:
            self._descriptors[key] = SchemaRegistry(settings).get()
        stencil = self._descriptors[key]
        subjects = subject_blobs(config, case, stencil)
        return DescriptorSet(stencil.blobs + subjects, absent=stencil.absent) if subjects else stencil

    def _observe(
        self,
        config: JobConfig,
        case: CaseConfig,
        directory: str,
        batches: list[dict],
        fresh_workers: bool = False,
        restarts: bool = False,
    ) -> Observed:
        """Run the job over ``batches`` (with ``restarts``, as one query per batch, each started from the last
        one's checkpoint) and observe what it wrote."""
        from dagger.runner import root_message  # start-up: loads pyspark

        observed = Observed()
        job = None
        for until in range(1, len(batches) + 1) if restarts else [None]:
            if fresh_workers:  # Spark keys its Python workers by their environment: a new one, new workers
                self._session(config).sparkContext.environment["DAGGER_TEST_RUN"] = uuid.uuid4().hex
            job = self._job(config, case, directory, batches, until)
            try:
                job.start()
                _wait(job)
                error = job.query.exception() if job.query is not None else None
                if error is not None:
                    observed.error = root_message(error)
                else:
                    count(job, observed)
            except DaggerConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed case shows the failure's last line
                observed.error = root_message(exc)
            if observed.error is not None:
                break
        if observed.error is None:
            collect(job, case, observed)
        observed.dead_letters = dead_letters(job.context.fixtures.dead_letter_dir)
        return observed

    def _job(self, config: JobConfig, case: CaseConfig, directory: str, batches: list[dict], until: int | None) -> Job:
        """The job with the case's fixtures (reading batches up to ``until``, all by default)."""
        from dagger.job import Job  # start-up: loads fastavro, google, pyarrow, pyspark, udfs
        from dagger.job.fixtures import JobFixtures  # start-up: loads fastavro, google, pyarrow, pyspark, udfs
        from dagger.kafka.source.memory import MemorySource  # start-up: loads google, numpy, pyarrow, pyspark
        from dagger.testing.records import CaseInputError  # start-up: loads fastavro, google, pyarrow, pyspark

        bounded = case.MODE == "bounded"
        descriptors = self._descriptor_set(config, case)
        mocks = [m.model_dump(exclude_none=True) for m in case.MOCKS]
        fixtures = JobFixtures({}, bounded, directory, descriptors, mocks)
        if case.LONGBOW_HISTORY and not Path(fixtures.longbow_store).exists():
            _seed_longbow(config, case, fixtures.longbow_store)
        for stream in config.STREAMS:
            try:
                records = _memory_records(stream, descriptors, batches, case.NAME)
            except CaseInputError as exc:
                raise CaseFileError(str(exc)) from None
            fixtures.sources[stream.INPUT_SCHEMA_TABLE] = MemorySource(
                records, len(batches), bounded, fixtures.dead_letter_dir, until
            )
        return Job(
            config,
            checkpoint_dir=str(Path(directory) / "checkpoint"),
            available_now=not bounded,
            spark=self._session(config),
            commit_offsets=False,
            fixtures=fixtures,
        )


def _seed_longbow(config: JobConfig, case: CaseConfig, path: str) -> None:
    """The case's ``LONGBOW_HISTORY`` (key → rows, each with its ``rowtime`` and its cells) written to the file
    Longbow reads instead of Bigtable, under the rows keys Dagger's Longbow gives them."""

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rowtime = config.FLINK_ROWTIME_ATTRIBUTE_NAME
    store = MemoryStore(path, table_name(config).path)
    try:
        for key, rows in (case.LONGBOW_HISTORY or {}).items():
            for i, row in enumerate(rows):
                when = row.get("rowtime", row.get(rowtime))
                if when is None:
                    raise CaseFileError(f"case {case.NAME!r}: LONGBOW_HISTORY.{key}[{i}] has no rowtime")
                ms = int(parse_instant(str(when), f"LONGBOW_HISTORY.{key}[{i}].rowtime").timestamp() * 1000)
                cells = {k: [str(v)] for k, v in row.items() if k not in ("rowtime", rowtime) and v is not None}
                store.write([row_key(key, ms)], [ms * 1000], cells)
    finally:
        store.close()


def _scratch() -> str | None:
    """tmpfs when there is one: a streaming case's checkpoint lives for a second."""
    return "/dev/shm" if Path("/dev/shm").is_dir() else None


def _memory_records(stream: Any, descriptors: DescriptorSet, batches: list[dict], name: str) -> list[Any]:
    """The stream's records of every batch, offsets counting on across batches as in one partition."""
    from dagger.kafka.source.memory import MemoryRecord  # start-up: loads google, numpy, pyarrow, pyspark
    from dagger.testing.records import encode_records  # start-up: loads fastavro, google, pyarrow, pyspark

    table = stream.INPUT_SCHEMA_TABLE
    out = []
    for k, batch in enumerate(batches):
        where = f"case {name!r}: " + (f"INPUT_BATCHES[{k}].{table}" if len(batches) > 1 else f"INPUT.{table}")
        for value in encode_records(stream, descriptors, batch.get(table, []), where):
            out.append(MemoryRecord(value, None, len(out), -1, k))
    return out


def _wait(job: Job) -> None:
    """Until the query ends (a streaming one once its input is used up and every closable window is out)."""
    from dagger.runner import is_drained  # start-up: loads pyspark

    query = job.query
    deadline = time.monotonic() + CASE_TIMEOUT_S
    while query.isActive:
        query.awaitTermination(0.1)
        if query.isActive and not job.bounded and is_drained(query):
            query.stop()  # an operator asking for batches forever (a processing-time TTL)
        if time.monotonic() > deadline:
            query.stop()
            raise TimeoutError(f"the case ran for more than {CASE_TIMEOUT_S:.0f} s")
    # a query is no longer active before it has left the session's active queries and released its state: the
    # termination's end is awaited, so the next case (or whoever asks the session) sees it gone
    with contextlib.suppress(Exception):  # a query that failed raises its failure here; the case reads it after
        query.awaitTermination()
