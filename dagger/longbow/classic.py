"""Classic Longbow on Bigtable (``longbow_key``): each row of the SQL output is written to the key's history,
then each ``longbow_data*`` column is replaced by that column's values over the row's range, most recent
first, the row's own value included (reference/dagger.md §4.8).

Runs on the executors inside ``mapInArrow``, one Arrow batch at a time: the batch's rows are written in one
``MutateRows`` call, then every row's range is read in ``ReadRows`` calls of up to 1,000 ranges each (at most
``PROCESSOR_LONGBOW_THREAD_CAPACITY`` in flight), and the rows found are split among the ranges by key. Writing
the whole batch before reading makes a row's history hold every row of its key at or before its rowtime,
including rows that arrived later in the same micro-batch with an earlier event time (Dagger, writing and
reading one row at a time, sees those only if their write happened to finish first).

Outcomes, as in Dagger: a failed write or read is counted and the row passes on (a failed read gives empty
histories); a call slower than ``PROCESSOR_LONGBOW_ASYNC_TIMEOUT`` stops the job. A row without a key or a
rowtime is neither written nor read (empty histories, counted). A ``longbow_duration`` that is not ``<n>m``,
``<n>h`` or ``<n>d`` stops the job, naming the value.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagger.latency import LatencyHistogram
from dagger.longbow.bigtable import EMULATOR_ENV, BigtableStore, TableName, open_store, row_key, scan_all
from dagger.longbow.ranges import millis, scan_ranges
from dagger.longbow.schema import LongbowKind, LongbowSchema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig

log = logging.getLogger(__name__)

#: Dagger's ``longbow.writer`` and ``longbow.reader`` meters, and the rows we pass on without a key or rowtime
COUNTERS = (
    "success_on_write_document",
    "failed_on_write_document",
    "success_on_read_document",
    "failed_on_read_document",
    "documents_read_per_scan",  # summed: documents read over all scans
    "failed_to_read_last_record",
    "rows_without_key",
)


#: Dagger's ``post_processor_type`` of each kind: classic Longbow writes and reads
PROCESSOR_TYPES = {
    LongbowKind.CLASSIC: ("longbow_writer_processor", "longbow_reader_processor"),
    LongbowKind.WRITER: ("longbow_writer_processor",),
    LongbowKind.READER: ("longbow_reader_processor",),
}
#: Dagger's ``*_response_time`` histograms of the Bigtable calls: (role, outcome)
CALLS = (("writer", "success"), ("writer", "failed"), ("reader", "success"), ("reader", "failed"))
#: their buckets (ms): a call carries a whole Arrow batch (a ``ReadRows`` of 1,000 rows' ranges took ~2.5 s on the
#: emulator), up to the default PROCESSOR_LONGBOW_ASYNC_TIMEOUT of 15 s
CALL_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 15000)


@dataclass
class LongbowMetrics:
    """Longbow's counters and its Bigtable calls' response times: Spark accumulators summed on the driver."""

    counters: dict[str, Any] = field(default_factory=dict)
    latency: dict[tuple[str, str], LatencyHistogram] = field(default_factory=dict)
    #: Dagger's ``post_processor_type`` telemetry values of this kind of Longbow
    processor_types: tuple[str, ...] = ()

    @classmethod
    def create(cls, spark: SparkSession, kind: LongbowKind = LongbowKind.CLASSIC) -> LongbowMetrics:
        return cls(
            {name: spark.sparkContext.accumulator(0) for name in COUNTERS},
            {call: LatencyHistogram.create(spark, CALL_BUCKETS_MS) for call in CALLS},
            PROCESSOR_TYPES[kind],
        )

    def add(self, counts: dict[str, int], timings: Iterable[tuple[str, str, float]] = ()) -> None:
        """Executor side: add a batch's ``counts`` and its calls' ``(role, outcome, ms)``."""
        for name, n in counts.items():
            if n:
                self.counters[name].add(n)
        by_call: dict[tuple[str, str], list[float]] = {}
        for role, outcome, ms in timings:
            by_call.setdefault((role, outcome), []).append(ms)
        for call, latencies in by_call.items():
            self.latency[call].add(latencies)

    def values(self) -> dict[str, int]:
        """Driver side: every counter's total."""
        return {name: accumulator.value for name, accumulator in self.counters.items()}


def table_name(config: JobConfig) -> TableName:
    """The Longbow table of ``config``: Dagger's keys and defaults."""
    return TableName(
        config.PROCESSOR_LONGBOW_GCP_PROJECT_ID,
        config.PROCESSOR_LONGBOW_GCP_INSTANCE_ID,
        config.PROCESSOR_LONGBOW_GCP_TABLE_ID or config.FLINK_JOB_ID,
    )


def classic_longbow(
    df: DataFrame, schema: LongbowSchema, config: JobConfig, metrics: LongbowMetrics, store: str | None = None
) -> DataFrame:
    """``df`` with its ``longbow_data*`` columns replaced by their histories (``ARRAY<STRING>``); ``store``: the
    file ``dagger test`` keeps the history in instead of Bigtable."""
    from pyspark.sql.types import ArrayType, StringType, StructField, StructType

    data = set(schema.data_columns)
    out = StructType(
        [StructField(f.name, ArrayType(StringType()), True) if f.name in data else f for f in df.schema.fields]
    )
    spec = {
        "table": table_name(config),
        "timeout_s": config.PROCESSOR_LONGBOW_ASYNC_TIMEOUT / 1000,
        "capacity": config.PROCESSOR_LONGBOW_THREAD_CAPACITY,
        "key": schema.key,
        "rowtime": schema.rowtime,
        "data": schema.data_columns,
        "range": schema.range,
        "emulator": os.environ.get(EMULATOR_ENV),  # the driver's: a local job's workers may not see it
        "store": store,
    }

    def batches(iterator: Iterator[Any]) -> Iterator[Any]:
        return _classic_batches(iterator, spec, out, metrics)

    return df.mapInArrow(batches, out)


def write_rows(
    store: BigtableStore, batch: Any, key: str, rowtime: str, cells: dict[str, list], counts: dict[str, int]
) -> tuple[list, list[int | None], list[bytes | None]]:
    """Write every row of ``batch`` that has a ``key`` and a ``rowtime`` under its row key, with one cell per
    ``cells`` qualifier (a value per row), counting the outcomes into ``counts``; returns the keys, the rowtimes
    (epoch ms) and each row's own row key (None without a key or rowtime). Classic Longbow and the Longbow+
    writer write this way."""
    keys = batch.column(key).to_pylist()
    rowtimes = millis(batch.column(rowtime))
    own = [row_key(k, t) if k is not None and t is not None else None for k, t in zip(keys, rowtimes, strict=True)]
    present = [i for i, k in enumerate(own) if k is not None]
    counts["rows_without_key"] = len(own) - len(present)
    failed = store.write(
        [own[i] for i in present],
        [rowtimes[i] * 1000 for i in present],
        {qualifier: [values[i] for i in present] for qualifier, values in cells.items()},
    )
    counts["failed_on_write_document"] = len(failed)
    counts["success_on_write_document"] = len(present) - len(failed)
    return keys, rowtimes, own


def _classic_batches(iterator: Iterator[Any], spec: dict, out: Any, metrics: LongbowMetrics) -> Iterator[Any]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(out, timezone="UTC")
    store = open_store(spec["table"], spec)
    durations: dict[str, int] = {}
    data = spec["data"]
    try:
        for batch in iterator:
            counts = dict.fromkeys(COUNTERS, 0)
            cells = {c: batch.column(c).to_pylist() for c in data}
            keys, rowtimes, own = write_rows(store, batch, spec["key"], spec["rowtime"], cells, counts)
            ranges = scan_ranges(batch, spec["range"], keys, rowtimes, own, durations)
            rows, unread, errors = scan_all(store, ranges, data, spec["capacity"])
            if errors:
                log.warning("Longbow: %d row(s) read no history: %s", len(unread), errors[0])
            counts["failed_on_read_document"] = len(unread)
            found = sorted(rows)
            history: dict[str, list[list[str | None] | None]] = {c: [None] * batch.num_rows for c in data}
            unread_set = set(unread)
            for i, span in enumerate(ranges):
                if span is None or i in unread_set:
                    for c in data:
                        history[c][i] = []
                    continue
                hits = found[bisect.bisect_left(found, span[0]) : bisect.bisect_right(found, span[1])]
                counts["success_on_read_document"] += 1
                counts["documents_read_per_scan"] += len(hits)
                if not hits or hits[0] != own[i]:
                    counts["failed_to_read_last_record"] += 1
                for c in data:
                    qualifier = c.encode()
                    history[c][i] = [_text(rows[k].get(qualifier)) for k in hits]
            metrics.add(counts, store.take_timings())
            arrays = [
                pa.array(history[name], type=arrow_schema.field(name).type) if name in history else batch.column(name)
                for name in batch.schema.names
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
    finally:
        store.close()


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")
