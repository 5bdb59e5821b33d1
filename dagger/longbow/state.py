"""Classic Longbow on Spark's own state (``PROCESSOR_LONGBOW_STORE=state``): no Bigtable, the same SQL and output.

Each key's history is a list in Spark's state store (``transformWithState``, RocksDB provider), checkpointed
with the job like any other state. An element of the list is a *chunk*: the entries one micro-batch added, as a
JSON array of ``[rowtime_ms, [longbow_data* values]]`` (readable with Spark's ``statestore`` reader and
``from_json``). A row is added to its key's history, then its ``longbow_data*`` columns are replaced by the values
over its range, most recent first, both ends inclusive, exactly as the Bigtable store gives them
(:mod:`dagger.longbow.classic`). A row with the same key and rowtime as an earlier one replaces it, as a Bigtable
row with the same row key is overwritten.

Writing appends: a micro-batch appends one chunk per key it touched, so its cost follows the batch, not the
history. What bounds the state:

- entries older than ``PROCESSOR_LONGBOW_DOCUMENT_DURATION`` before the key's newest rowtime are never read
  again, and the list is rewritten without them (and without replaced entries) once they are as many as the live
  ones, or once the list holds :data:`MAX_CHUNKS` chunks: each entry is rewritten a bounded number of times
  (Bigtable's max-age rule counts from the wall clock instead);
- a chunk nobody appended to for that long is forgotten (each list element's TTL, in processing time), so a key
  that gets no rows goes away.

Longbow+ needs a table several jobs share, so it stays on Bigtable.
"""

from __future__ import annotations

import bisect
import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagger.longbow.classic import COUNTERS, LongbowMetrics
from dagger.longbow.schema import DURATION, EARLIEST, LATEST, LongbowSchema, duration_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.config.model import JobConfig

KEY_COLUMN = "__longbow_key"
#: chunks a key's list may hold before it is rewritten as one: bounds what a read of the history costs
MAX_CHUNKS = 64

Entry = tuple[int, list[str | None]]  # (rowtime in epoch ms, one value per longbow_data* column)


class Store(enum.Enum):
    """What a micro-batch does to a key's stored list."""

    KEEP = "keep"  # nothing new: the list stays as it is
    APPEND = "append"  # the batch's live entries become one more chunk
    REWRITE = "rewrite"  # the list is replaced by one chunk of the live entries


@dataclass(frozen=True)
class History:
    """A key's live entries after a micro-batch, in rowtime order, and how to store them."""

    entries: list[Entry]
    store: Store
    fresh: list[Entry]  # the batch's own live entries: the chunk an APPEND adds

    @property
    def times(self) -> list[int]:
        return [ms for ms, _ in self.entries]


def settle(chunks: Sequence[str], fresh: Sequence[Entry], keep_ms: int) -> History:
    """The history of a key whose list holds ``chunks`` once the batch's ``fresh`` entries are added.

    Runs on an executor, in the Python worker of the key's partition. An entry is live when it is no older than
    ``keep_ms`` before the newest rowtime and no later entry has its rowtime.
    """
    stored: list[Entry] = [(ms, values) for chunk in chunks for ms, values in json.loads(chunk)]
    every = stored + list(fresh)
    if not every:
        return History([], Store.KEEP, [])
    floor = max(ms for ms, _ in every) - keep_ms
    live = {ms: values for ms, values in every if ms >= floor}  # a later entry replaces one with its rowtime
    entries = sorted(live.items())
    new = [(ms, values) for ms, values in fresh if ms >= floor]
    if len(every) - len(entries) > len(entries) or len(chunks) >= MAX_CHUNKS:
        return History(entries, Store.REWRITE, new)
    return History(entries, Store.APPEND if new else Store.KEEP, new)


def chunk(entries: Iterable[Entry]) -> tuple[str]:
    """One list element: the entries as a JSON array (the state's element schema has one string column)."""
    return (json.dumps([[ms, values] for ms, values in entries], separators=(",", ":")),)


def state_longbow(df: DataFrame, schema: LongbowSchema, config: JobConfig, metrics: LongbowMetrics) -> DataFrame:
    """``df`` with its ``longbow_data*`` columns replaced by their histories, kept in Spark's state store."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StringType, StructField, StructType

    data = set(schema.data_columns)
    out = StructType(
        [StructField(f.name, ArrayType(StringType()), True) if f.name in data else f for f in df.schema.fields]
    )
    keep_ms = duration_ms(config.PROCESSOR_LONGBOW_DOCUMENT_DURATION, "PROCESSOR_LONGBOW_DOCUMENT_DURATION")
    processor = _History(schema, df.columns, keep_ms, metrics)
    keyed = df.withColumn(KEY_COLUMN, F.col(schema.key))
    return keyed.groupBy(KEY_COLUMN).transformWithState(
        statefulProcessor=processor, outputStructType=out, outputMode="Append", timeMode="ProcessingTime"
    )


def _processor_base() -> type:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


def _epoch_ms(value: Any) -> int | None:
    """A rowtime (datetime) or an epoch-millisecond bound as epoch milliseconds."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    import datetime as dt

    if value.tzinfo is None:  # Spark hands TIMESTAMP_NTZ and session-zone TIMESTAMP values without a zone
        value = value.replace(tzinfo=dt.UTC)
    return (value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


class _History(_processor_base()):  # type: ignore[misc]
    """One key's history: a list state of chunks (:func:`chunk`), settled per micro-batch by :func:`settle`."""

    def __init__(self, schema: LongbowSchema, columns: list[str], keep_ms: int, metrics: LongbowMetrics):
        self.schema = schema
        self.columns = columns
        self.keep_ms = keep_ms
        self.metrics = metrics

    def init(self, handle: Any) -> None:
        from pyspark.sql.types import StringType, StructField, StructType

        self.history = handle.getListState("history", StructType([StructField("chunk", StringType())]), self.keep_ms)

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - Spark's API
        from pyspark.sql import Row

        schema = self.schema
        data = schema.data_columns
        counts = dict.fromkeys(COUNTERS, 0)
        batch = [r.asDict(recursive=False) for r in rows]
        fresh: list[Entry] = []
        for row in batch:
            ms = _epoch_ms(row[schema.rowtime])
            if ms is None or row[schema.key] is None:
                counts["rows_without_key"] += 1
                continue
            fresh.append((ms, [row[c] for c in data]))
            counts["success_on_write_document"] += 1
        history = settle([c for (c,) in self.history.get()], fresh, self.keep_ms)  # none stored: get() yields none
        if history.store is Store.REWRITE:
            self.history.put([chunk(history.entries)])
        elif history.store is Store.APPEND:
            self.history.appendValue(chunk(history.fresh))
        kept, times = history.entries, history.times
        out = []
        for row in batch:
            span = self._range(row)
            hits = (
                [] if span is None else kept[bisect.bisect_left(times, span[0]) : bisect.bisect_right(times, span[1])]
            )
            if span is not None:
                counts["success_on_read_document"] += 1
                counts["documents_read_per_scan"] += len(hits)
            values = dict(row)
            for i, column in enumerate(data):
                values[column] = [entry[1][i] for entry in reversed(hits)]
            out.append(Row(**{c: values[c] for c in self.columns}))  # kwargs keep their order (PySpark 3+)
        self.metrics.add(counts)
        return iter(out)

    def _range(self, row: dict[str, Any]) -> tuple[int, int] | None:
        """The row's inclusive range of rowtimes (epoch ms), or None when it reads nothing."""
        schema = self.schema
        if row[schema.key] is None:
            return None
        if schema.range == "duration":
            ms, text = _epoch_ms(row[schema.rowtime]), row[DURATION]
            if ms is None or text is None:
                return None
            return ms - duration_ms(text, f"{DURATION} of a row (key {row[schema.key]!r})"), ms
        earliest, latest = _epoch_ms(row[EARLIEST]), _epoch_ms(row[LATEST])
        if earliest is None or latest is None or earliest > latest:
            return None
        return earliest, latest

    def close(self) -> None:
        return None
