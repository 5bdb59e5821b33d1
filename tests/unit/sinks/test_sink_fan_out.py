"""The one Spark writer that drives every sink of a job: when one sink fails, none of the others delivers.

The sinks here record what the writer asks of them (write, flush, abort); the Kafka producers' own abort
behaviour is tested against the broker in tests/integration/kafka/source/test_native.py.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagger.errors import SinkError
from dagger.plugins.sink import Sink, SinkWriter
from dagger.sinks.spark_writer import FanOutWriter

BATCH = pa.RecordBatch.from_pydict({"x": [1, 2, 3]})


class Recording(Sink):
    """A sink that records every call in ``log`` and fails where told to."""

    name = "recording"

    def __init__(self, label: str, log: list, fail: str | None = None):
        self.label, self.log, self.fail = label, log, fail

    @classmethod
    def from_settings(cls, settings, descriptors):  # noqa: ANN001, ANN206
        raise NotImplementedError

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        if self.fail == "open":
            raise SinkError(f"{self.label} cannot open")
        return _Writer(self)

    def commit(self, results: list, batch_id: int) -> None:
        self.log.append((self.label, "commit", batch_id))

    def abort(self, batch_id: int) -> None:
        self.log.append((self.label, "abort batch", batch_id))
        if self.fail == "abort":
            raise RuntimeError("a clean-up that fails")


class _Writer(SinkWriter):
    def __init__(self, sink: Recording):
        self.sink = sink

    def write(self, batch: pa.RecordBatch) -> None:
        self.sink.log.append((self.sink.label, "write"))
        if self.sink.fail == "write":
            raise SinkError(f"{self.sink.label} refused the batch")

    def flush(self) -> str:
        self.sink.log.append((self.sink.label, "flush"))
        if self.sink.fail == "flush":
            raise SinkError(f"{self.sink.label} could not deliver")
        return self.sink.label

    def abort(self) -> None:
        self.sink.log.append((self.sink.label, "abort"))


@pytest.mark.parametrize(
    "fail, expected",
    [
        (None, ["a write", "b write", "c write", "a flush", "b flush", "c flush"]),
        ("write", ["a write", "b write", "a abort", "b abort", "c abort"]),
        ("flush", ["a write", "b write", "c write", "a flush", "b flush", "b abort", "c abort"]),
        ("open", ["a abort"]),
    ],
)
def test_a_failing_sink_leaves_no_other_sink_unflushed_or_open(fail, expected):
    log: list = []
    sinks = [Recording("a", log), Recording("b", log, fail), Recording("c", log)]
    writer = FanOutWriter(sinks)
    if fail is None:
        assert writer.write(iter([BATCH])).results == ["a", "b", "c"]
    else:
        with pytest.raises(SinkError, match="b "):
            writer.write(iter([BATCH]))
    assert [" ".join(entry) for entry in log] == expected


def test_a_failed_micro_batch_reaches_every_sink_even_when_a_clean_up_fails(caplog):
    log: list = []
    sinks = [Recording("a", log, "abort"), Recording("b", log)]
    FanOutWriter(sinks).abort([None], 7)
    assert log == [("a", "abort batch", 7), ("b", "abort batch", 7)]
    assert "a sink's clean-up failed" in caplog.text
