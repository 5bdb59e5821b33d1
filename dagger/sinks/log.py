"""``SINK_TYPE=log``: one readable line per output row, for debugging and the quickstart.

As in Dagger, each row is logged as a ``{column=value, ...}`` map of its non-null columns, on the driver's
log stream (stderr: Spark redirects the stdout of Python data-source workers). Lines are
collected by the writers and printed by the driver when the micro-batch commits, in order, so the output
of a local run reads top to bottom (and lands in the driver log on a cluster).
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dagger.plugins.sink import Sink, SinkEnv, SinkSettings, SinkWriter
from dagger.sinks.capture import keep, read_spool_rows
from dagger.sinks.readback import logged, rfc3339

if TYPE_CHECKING:
    pass


def format_value(value: Any) -> str:
    """A compact, readable rendering of one value."""
    if isinstance(value, dt.datetime):
        return rfc3339(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={format_value(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, tuple):
        return f"{format_value(value[0])}={format_value(value[1])}"
    return str(value)


class LogSinkSettings(SinkSettings):
    """Log: one readable `{column=value, ...}` line per row on the driver (debugging, the quickstart)."""


def format_rows(batch: pa.RecordBatch) -> list[str]:
    """Dagger's log-sink line for each row of ``batch``."""
    return [
        "{" + ", ".join(f"{k}={format_value(v)}" for k, v in row.items() if v is not None) + "}"
        for row in batch.to_pylist()
    ]


class _LogWriter(SinkWriter):
    def __init__(self, sink: LogSink, partition_id: int, batch_id: int) -> None:
        self.sink = sink
        self.lines: list[str] = []
        self.batches: list[pa.RecordBatch] = []
        self.where = (batch_id, partition_id)

    def write(self, batch: pa.RecordBatch) -> None:
        self.lines.extend(format_rows(batch))
        if self.sink.capture is not None:  # dagger test: the rows themselves, not their lines
            self.batches.append(batch)

    def flush(self) -> list[str]:
        self.sink.count("written", len(self.lines))
        if self.sink.capture is not None:
            keep(self.sink.capture, *self.where, self.batches)
            return []  # nothing printed
        return self.lines


class LogSink(Sink):
    """Print every output row on the driver."""

    name = "log"
    rerun = "prints the rows again"

    def __init__(self, stream: Any = None):
        self._stream = stream

    @classmethod
    def from_settings(cls, config: LogSinkSettings, env: SinkEnv) -> LogSink:
        return cls()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_stream": None}

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _LogWriter(self, partition_id, batch_id)

    def written_records(self, capture: str) -> list[dict[str, Any]]:
        return [logged(row) for row in read_spool_rows(capture)]

    def expected_record(self, record: dict[str, Any], partial: bool) -> dict[str, Any]:
        return {k: v for k, v in record.items() if v is not None}  # the log leaves null columns out

    def commit(self, results: list[Any], batch_id: int) -> None:
        out = self._stream or sys.stdout
        for lines in results:
            for line in lines or []:
                out.write(line + "\n")
        out.flush()
