"""Rows a sink rejects: failed on, or written to the job's dead-letter output, counted.

Rows a sink *rejects* (a value its destination cannot take) are not write failures: the writer hands them to
:class:`RejectedRows`, which fails the batch when their error type is in ``SINK_ERROR_TYPES_FOR_FAILURE`` (or
when the job has no dead-letter output) and otherwise writes them to the job's dead-letter output
(:mod:`dagger.dead_letter`). :func:`isolate` finds the refused rows of a batch a destination refused. Runs on
executors, in the sink's writers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dagger.dead_letter import row_json
from dagger.errors import SinkError
from dagger.plugins.sink import JVM_COLUMN_PREFIX

if TYPE_CHECKING:
    from dagger.plugins.sink import Sink


class RejectedRows:
    """Rows one task of a sink rejected: failed on, or sent to the dead-letter output.

    Parameters
    ----------
    sink:
        The sink (its ``fail_on``, ``dead_letter`` and name decide what happens).
    batch_id, partition:
        The micro-batch and Spark partition, recorded as the dead letters' coordinates.
    """

    def __init__(self, sink: Sink, batch_id: int, partition: int):
        self.sink = sink
        self.batch_id = batch_id
        self.partition = partition
        self._writer: Any = None
        self.count = 0

    def add(self, rows: pa.RecordBatch | pa.Table, reasons: list[str], error_types: list[str]) -> None:
        """Handle rejected ``rows`` (one reason and error type per row)."""
        if not len(reasons):
            return

        own = [n for n in rows.schema.names if n.startswith(JVM_COLUMN_PREFIX)]
        if own:  # the sink's encodings are not the row
            rows = rows.drop_columns(own)
        name = self.sink.display_name
        for index, error_type in enumerate(error_types):
            if error_type in self.sink.fail_on or self.sink.dead_letter is None:
                row = row_json(rows.slice(index, 1).to_pylist()[0])
                hint = (
                    f"{error_type} is listed in SINK_ERROR_TYPES_FOR_FAILURE"
                    if error_type in self.sink.fail_on
                    else "set DEAD_LETTER_KAFKA_TOPIC (+ _BROKERS) or DEAD_LETTER_PATH to keep the job running and "
                    "collect rejected rows there"
                )
                raise SinkError(
                    f"sink '{name}' rejected a row of batch {self.batch_id} ({error_type}): {reasons[index]}; "
                    f"{hint}. Row: {row[:500]}"
                )
        if self._writer is None:
            self._writer = self.sink.dead_letter.writer("sink", name, self.batch_id, self.partition)
        self._writer.write_rows(rows.to_pylist(), reasons, error_types)
        self.count += len(reasons)

    def abort(self) -> None:
        """The task failed: drop the dead letters collected (the retried batch rejects the rows again)."""
        writer, self._writer, self.count = self._writer, None, 0
        close = getattr(writer, "close", None)
        if close is not None:
            close()

    def flush(self) -> int:
        """Make the dead letters durable; count them; return how many this task wrote."""
        if self._writer is not None:
            self._writer.flush()
        self.sink.count("dead_letters", self.count)
        written, self.count = self.count, 0
        return written


class RowsRefused(Exception):
    """Raised by a write attempt when its destination refused rows (all of them, or the ``rows`` indexes)."""

    def __init__(self, error_type: str, reason: str, rows: list[int] | None = None):
        super().__init__(reason)
        self.error_type = error_type
        self.reason = reason
        self.rows = rows


def isolate(batch: pa.RecordBatch, attempt: Any, rejected: RejectedRows) -> None:
    """Write ``batch`` with ``attempt``; when it is refused, find the refused rows and reject only them.

    ``attempt(part)`` must either write all of ``part`` or nothing (raising :class:`RowsRefused`). Rows the
    refusal names are rejected and the rest retried; otherwise the batch is halved until the refused rows
    are alone (k bad rows in n cost about k·log2(n) attempts). A ``SINK_5XX_ERROR`` refusal is about the
    server, not the rows: the whole part is rejected without splitting.
    """
    try:
        attempt(batch)
    except RowsRefused as refused:
        n = batch.num_rows
        if refused.rows:
            bad = pa.array(sorted(set(refused.rows)), pa.int64())
            keep = pc.invert(pc.is_in(pa.array(range(n), pa.int64()), value_set=bad))
            rejected.add(batch.take(bad), [refused.reason] * len(bad), [refused.error_type] * len(bad))
            if pc.any(keep).as_py():
                isolate(batch.filter(keep), attempt, rejected)
        elif n == 1 or refused.error_type == "SINK_5XX_ERROR":
            rejected.add(batch, [refused.reason] * n, [refused.error_type] * n)
        else:
            isolate(batch.slice(0, n // 2), attempt, rejected)
            isolate(batch.slice(n // 2), attempt, rejected)
