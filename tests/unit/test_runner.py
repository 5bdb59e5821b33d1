"""The runner: signals installed before planning, a second signal stops at once, stop conditions, exit codes."""

from __future__ import annotations

import logging
import os
import signal
import time
from types import SimpleNamespace

import pytest

from dagger.runner import JobRunner, is_drained, root_message


@pytest.fixture
def saved_signals():
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in handlers.items():
        signal.signal(s, h)


class Progress:
    """A query's progress history, as Spark's ``recentProgress`` lists it (the drain check reads nothing else)."""

    def __init__(self, batches: list[tuple[int, bool]]):
        sources = lambda at_end: [{"endOffset": "x", "latestOffset": "x" if at_end else "y"}]  # noqa: E731
        self.recentProgress = [{"numInputRows": rows, "sources": sources(at_end)} for rows, at_end in batches]


@pytest.mark.parametrize(
    "batches, drained",
    [
        ([(10, True), (0, True), (0, True), (0, True)], True),
        ([(0, True), (0, True)], False),  # fewer than three batches
        ([(0, True), (5, True), (0, True)], False),  # a recent batch read rows
        ([(0, True), (0, True), (0, False)], False),  # a source is not at its latest offset
        ([], False),
    ],
)
def test_is_drained(batches, drained):
    assert is_drained(Progress(batches)) is drained


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "py4j...\norg.apache.spark: SinkError: sink 'kafka' rejected a row\n at ...",
            "SinkError: sink 'kafka' rejected a row",
        ),
        (
            "Job aborted: InvalidRecordError: stream 't': record at offset 3 cannot be decoded\nmore",
            "InvalidRecordError: stream 't': record at offset 3 cannot be decoded",
        ),
        ("  first line\nsecond", "first line"),
        (  # a failure of the SQL whose plan, printed with it, holds the text of our raise_error() expressions
            "[CAST_INVALID_INPUT] The value 'o-0' cannot be cast to \"INT\". SQLSTATE: 22018\n== Plan ==\n"
            "Project [CASE WHEN x THEN raise_error(concat(InvalidRecordError: stream 't': record at topic , ...)",
            "[CAST_INVALID_INPUT] The value 'o-0' cannot be cast to \"INT\". SQLSTATE: 22018",
        ),
        (  # raised by raise_error() in the JVM
            "[USER_RAISED_EXCEPTION] InvalidRecordError: stream 't': record at topic a partition 0 offset 3 cannot be "
            "decoded: not a valid M. Set X. SQLSTATE: P0001",
            "InvalidRecordError: stream 't': record at topic a partition 0 offset 3 cannot be decoded: not a valid M. "
            "Set X.",
        ),
        (  # a Python data source's failure, as Spark wraps it: the traceback's last line holds the message
            "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
            'initialOffset: Traceback (most recent call last):\n  File "/x/dagger/sources/kafka.py", line 231\n'
            "    raise SourceError(\ndagger.errors.SourceError: stream 't': cannot list topics on 127.0.0.1:1\n"
            " SQLSTATE: 38000",
            "SourceError: stream 't': cannot list topics on 127.0.0.1:1",
        ),
        (  # a lookup's error raised in a task, module-qualified
            "Job aborted due to stage failure: ... org.apache.spark.api.python.PythonException: Traceback ...\n"
            "dagger.processors.external.base.LookupError_: HTTP.0: GET http://x returned 500\n\tat ...",
            "LookupError: HTTP.0: GET http://x returned 500",
        ),
        (  # a user's UDF raised
            "[PYTHON_UDF] ... org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            '  File "/tmp/udfs.py", line 3, in slowly\n    raise ValueError(f"bad order {x}")\n'
            "ValueError: bad order o-1\n\n\tat org.apache.spark...",
            "ValueError: bad order o-1",
        ),
        (  # a JVM exception whose message is a wrapper's: its deepest cause is named after it
            "Job aborted due to stage failure: Lost task 0.0: org.apache.kafka.common.KafkaException: Failed to "
            "construct kafka producer\n\tat org.apache.kafka.clients.producer.KafkaProducer.<init>(KP.java:1)\n"
            "Caused by: org.apache.kafka.common.KafkaException: wrapped\n\tat x\n"
            "Caused by: org.apache.kafka.common.config.ConfigException: delivery.timeout.ms should be equal to or "
            "larger than linger.ms + request.timeout.ms\n\tat y",
            "Job aborted due to stage failure: Lost task 0.0: org.apache.kafka.common.KafkaException: Failed to "
            "construct kafka producer; caused by ConfigException: delivery.timeout.ms should be equal to or larger "
            "than linger.ms + request.timeout.ms",
        ),
    ],
)
def test_root_message_names_the_most_specific_cause(text, expected):
    assert root_message(RuntimeError(text)) == expected


class NotStarted:
    """A job that records whether it was planned and started."""

    bounded = real_time = False
    options = SimpleNamespace(available_now=False)
    config = SimpleNamespace(METRIC_TELEMETRY_ENABLE=False)
    spark = query = None

    def __init__(self):
        self.planned = self.started = False

    def reach(self):  # noqa: ANN201
        pass

    def validate(self):  # noqa: ANN201
        self.planned = True
        return "plan"

    def start(self, plan):  # noqa: ANN001, ANN201
        self.started = True
        raise AssertionError("a stop requested during planning must not start the query")


def test_handlers_are_installed_before_planning_and_a_stop_then_starts_nothing(saved_signals, caplog):
    job = NotStarted()
    runner = JobRunner(job)
    assert signal.getsignal(signal.SIGINT) == runner._on_signal
    assert signal.getsignal(signal.SIGTERM) == runner._on_signal
    runner._on_signal(signal.SIGTERM, None)  # arrives while the job is still being planned
    with caplog.at_level(logging.INFO, logger="dagger"):
        assert runner.run() == 0
    assert job.planned and not job.started
    assert "stopped before the query started" in caplog.text
    with pytest.raises(KeyboardInterrupt):  # a second one during planning abandons it
        runner._on_signal(signal.SIGINT, None)


class BackToBack:
    """A live query whose micro-batches follow one another with no moment between them, as long as its source
    admits input (its job's hold file is absent)."""

    isActive = True

    def __init__(self, hold_file: str):
        self.hold_file = hold_file
        self.stopped_with_hold = None

    @property
    def status(self) -> dict:
        return {"isTriggerActive": not os.path.exists(self.hold_file)}

    def stop(self) -> None:
        self.stopped_with_hold = os.path.exists(self.hold_file)


def test_a_stop_holds_the_input_so_back_to_back_batches_end_at_once(tmp_path, saved_signals):
    """Without a moment between two micro-batches the runner waited out its whole timeout (120 s, beyond a
    pod's grace period); holding the input makes the running batch the last."""

    from dagger.job import Job

    job = NotStarted()
    job.context = SimpleNamespace(hold_file=str(tmp_path / "hold"))
    job.stop = lambda **kw: Job.stop(job, **kw)  # the real stop, on a job whose query runs batches back to back
    job.config = SimpleNamespace(METRIC_TELEMETRY_ENABLE=False, FLINK_JOB_ID="j")
    query = BackToBack(job.context.hold_file)
    began = time.monotonic()
    JobRunner(job)._stop_between_batches(query, timeout=10)
    assert time.monotonic() - began < 2
    assert query.stopped_with_hold is True  # no new batch could start between the wait and the stop
    assert not os.path.exists(job.context.hold_file)  # released: a restarted query reads on


def test_a_held_kafka_source_plans_no_new_input(tmp_path):
    from pyspark.sql.datasource import ReadAllAvailable

    from dagger.kafka.source.reader import KafkaStreamReader
    from dagger.kafka.source.spec import KafkaSourceSpec

    hold = tmp_path / "hold"
    spec = KafkaSourceSpec("t", "x", {"bootstrap.servers": "127.0.0.1:1"})
    spec.hold_file = str(hold)
    hold.touch()
    start = {"@table": "t", "x:0": 5}
    assert KafkaStreamReader(spec).latestOffset(start, ReadAllAvailable()) == start  # no broker asked
