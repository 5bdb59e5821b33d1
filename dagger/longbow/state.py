"""Classic Longbow on Spark's own state (``PROCESSOR_LONGBOW_STORE=state``): no Bigtable, the same SQL and output.

Each key's history is a list in Spark's state store (``transformWithState``, RocksDB provider), checkpointed
with the job like any other state: an entry per rowtime holding the row's ``longbow_data*`` values (a row with
the same key and rowtime replaces the entry, as a Bigtable row with the same row key is overwritten). A row is
added to its key's history, then its ``longbow_data*`` columns are replaced by the values over its range, most
recent first, both ends inclusive, exactly as the Bigtable store gives them (:mod:`dagger.longbow.classic`).

What bounds the state: entries older than ``PROCESSOR_LONGBOW_DOCUMENT_DURATION`` before the key's newest
rowtime are dropped whenever the key gets rows (Bigtable's max-age rule counts from the wall clock instead), and
a key that gets no rows for that long is forgotten (the list's TTL, in processing time). Longbow+ needs a table
several jobs share, so it stays on Bigtable.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from dagger.longbow.classic import COUNTERS, LongbowMetrics
from dagger.longbow.schema import DURATION, EARLIEST, LATEST, LongbowSchema, duration_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.config.model import JobConfig

KEY_COLUMN = "__longbow_key"


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
    """One key's history: a list state of ``(rowtime_ms, values)``, values one string per ``longbow_data*``."""

    def __init__(self, schema: LongbowSchema, columns: list[str], keep_ms: int, metrics: LongbowMetrics):
        self.schema = schema
        self.columns = columns
        self.keep_ms = keep_ms
        self.metrics = metrics

    def init(self, handle: Any) -> None:
        from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

        entry = StructType([StructField("ms", LongType()), StructField("values", ArrayType(StringType()))])
        self.history = handle.getListState("history", entry, self.keep_ms)

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - Spark's API
        from pyspark.sql import Row

        schema = self.schema
        data = schema.data_columns
        counts = dict.fromkeys(COUNTERS, 0)
        batch = [r.asDict(recursive=False) for r in rows]
        stored = {ms: values for ms, values in self.history.get()}  # a key without history: get() yields nothing
        for row in batch:
            ms = _epoch_ms(row[schema.rowtime])
            if ms is None or row[schema.key] is None:
                counts["rows_without_key"] += 1
                continue
            stored[ms] = [row[c] for c in data]
            counts["success_on_write_document"] += 1
        if stored:
            newest = max(stored)
            kept = sorted((ms, values) for ms, values in stored.items() if ms >= newest - self.keep_ms)
            self.history.put(kept)
        else:
            kept = []
        times = [ms for ms, _ in kept]
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
