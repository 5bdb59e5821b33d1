"""Longbow+ (reference/dagger.md §4.8): one job writes whole rows as messages, others read them back.

* **Writer** (``longbow_write_key``): each row of the SQL output is serialized as the first stream's
  ``INPUT_SCHEMA_PROTO_CLASS`` (columns named after its fields; the others, such as the key and ``rowtime``, are
  left out, as Dagger's serializer leaves them) into one cell ``ts:proto`` under Dagger's row key, and the row
  goes on with three columns appended: ``bigtable_table_id``, ``input_class_name`` and ``longbow_read_key`` (the
  write key). That output, usually sunk to Kafka, is the "synchronizer log" reader jobs consume.
* **Reader** (``longbow_read_key``): each row reads, from the table its ``bigtable_table_id`` column names, the
  ``ts:proto`` cells of its key over its range, and goes on with ``proto_data`` appended: ``ARRAY<BINARY>``, the
  serialized messages most recent first, for ``SelectFields``, ``Filters``, ``CondEq`` and the array functions.

Both run on the executors inside ``mapInArrow`` with classic Longbow's store and outcomes
(:mod:`dagger.longbow.classic`): one ``MutateRows`` call per Arrow batch, ``ReadRows`` calls of up to 1,000
ranges; a failed write or read counted and the row passed on (an empty ``proto_data``), a timeout fatal.
"""

from __future__ import annotations

import base64
import bisect
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.longbow.bigtable import EMULATOR_ENV, BigtableStore, TableName, open_store, row_key, scan_all
from dagger.longbow.classic import COUNTERS, LongbowMetrics, table_name, write_rows
from dagger.longbow.ranges import millis, scan_ranges
from dagger.longbow.schema import PROTO_DATA, LongbowSchema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.config.model import JobConfig
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger(__name__)

QUALIFIER = "proto"  # Dagger's LONGBOW_QUALIFIER_DEFAULT
TABLE_COLUMN = "bigtable_table_id"
CLASS_COLUMN = "input_class_name"
READ_KEY_COLUMN = "longbow_read_key"


def input_message(config: JobConfig) -> str:
    """The message the writer serializes rows as: the first stream's ``INPUT_SCHEMA_PROTO_CLASS``."""
    stream = config.STREAMS[0]
    name = getattr(stream.format, "INPUT_SCHEMA_PROTO_CLASS", None)
    if not name:
        raise DaggerConfigError(
            "FLINK_SQL_QUERY: the Longbow+ writer (longbow_write_key) serializes rows as the first stream's "
            f"INPUT_SCHEMA_PROTO_CLASS, and stream {stream.INPUT_SCHEMA_TABLE} has none (a JSON stream)"
        )
    return name


def plus_writer(
    df: DataFrame,
    schema: LongbowSchema,
    config: JobConfig,
    descriptors: DescriptorSet,
    metrics: LongbowMetrics,
    store: str | None = None,
) -> DataFrame:
    """``df`` written to Longbow's table as messages, with the synchronizer columns appended; ``store``: the file
    ``dagger test`` keeps the table in instead of Bigtable."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StringType, StructField, StructType

    from dagger.serde.encode import ProtoEncoder  # start-up: loads google, numpy, pyarrow, pyspark

    message = input_message(config)
    encoder = ProtoEncoder(descriptors.find_message(message), key="the Longbow+ writer (first stream's message)")
    problems = encoder.check(to_arrow_schema(df.schema, timezone="UTC"))
    if problems:
        raise DaggerConfigError(f"FLINK_SQL_QUERY: {problems[0]}")
    out = StructType(
        [
            *df.schema.fields,
            *(StructField(c, StringType(), True) for c in (TABLE_COLUMN, CLASS_COLUMN, READ_KEY_COLUMN)),
        ]
    )
    spec = {
        "table": table_name(config),
        "timeout_s": config.PROCESSOR_LONGBOW_ASYNC_TIMEOUT / 1000,
        "key": schema.key,
        "rowtime": schema.rowtime,
        "message": message,
        "descriptor_set_b64": base64.b64encode(descriptors.serialized).decode(),
        "emulator": os.environ.get(EMULATOR_ENV),
        "store": store,
    }

    def batches(iterator: Iterator[Any]) -> Iterator[Any]:
        return _writer_batches(iterator, spec, out, metrics)

    return df.mapInArrow(batches, out)


def _encoder(spec: dict) -> Any:
    from google.protobuf import descriptor_pb2

    from dagger.schema.descriptor_sets import build_pool  # start-up: loads google
    from dagger.serde.encode import ProtoEncoder  # start-up: loads google, numpy, pyarrow, pyspark

    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["descriptor_set_b64"]))
    return ProtoEncoder(build_pool(files).FindMessageTypeByName(spec["message"]))


def _writer_batches(iterator: Iterator[Any], spec: dict, out: Any, metrics: LongbowMetrics) -> Iterator[Any]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(out, timezone="UTC")
    store = open_store(spec["table"], spec)
    encoder = _encoder(spec)
    table_id, message = spec["table"].table, spec["message"]
    try:
        for batch in iterator:
            counts = dict.fromkeys(COUNTERS, 0)
            cells = {QUALIFIER: encoder.encode(batch).to_pylist()}
            write_rows(store, batch, spec["key"], spec["rowtime"], cells, counts)
            metrics.add(counts, store.take_timings())
            n = batch.num_rows
            arrays = [
                *batch.columns,
                pa.array([table_id] * n, pa.string()),
                pa.array([message] * n, pa.string()),
                batch.column(spec["key"]).cast(pa.string()),
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
    finally:
        store.close()


def plus_reader(
    df: DataFrame, schema: LongbowSchema, config: JobConfig, metrics: LongbowMetrics, store: str | None = None
) -> DataFrame:
    """``df`` with ``proto_data`` appended: each row's history of serialized messages, most recent first;
    ``store``: the file ``dagger test`` keeps the tables in instead of Bigtable."""
    from pyspark.sql.types import ArrayType, BinaryType, StructField, StructType

    needed = [TABLE_COLUMN] + ([schema.rowtime] if schema.range == "duration" else [])
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise DaggerConfigError(
            f"FLINK_SQL_QUERY: the Longbow+ reader (longbow_read_key) reads the table named in column "
            f"{TABLE_COLUMN} and, over a longbow_duration, back from the row's {schema.rowtime}; the SQL output "
            f"lacks {', '.join(missing)} (select them from the writer's synchronizer log)"
        )
    out = StructType([*df.schema.fields, StructField(PROTO_DATA, ArrayType(BinaryType()), True)])
    spec = {
        "project": config.PROCESSOR_LONGBOW_GCP_PROJECT_ID,
        "instance": config.PROCESSOR_LONGBOW_GCP_INSTANCE_ID,
        "timeout_s": config.PROCESSOR_LONGBOW_ASYNC_TIMEOUT / 1000,
        "capacity": config.PROCESSOR_LONGBOW_THREAD_CAPACITY,
        "key": schema.key,
        "rowtime": schema.rowtime,
        "range": schema.range,
        "emulator": os.environ.get(EMULATOR_ENV),
        "store": store,
    }

    def batches(iterator: Iterator[Any]) -> Iterator[Any]:
        return _reader_batches(iterator, spec, out, metrics)

    return df.mapInArrow(batches, out)


def _reader_batches(iterator: Iterator[Any], spec: dict, out: Any, metrics: LongbowMetrics) -> Iterator[Any]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(out, timezone="UTC")
    stores: dict[str, BigtableStore] = {}
    durations: dict[str, int] = {}
    qualifier = QUALIFIER.encode()
    try:
        for batch in iterator:
            counts = dict.fromkeys(COUNTERS, 0)
            n = batch.num_rows
            keys = batch.column(spec["key"]).to_pylist()
            tables = batch.column(TABLE_COLUMN).to_pylist()
            rowtimes = millis(batch.column(spec["rowtime"])) if spec["range"] == "duration" else [None] * n
            own = [
                row_key(k, t) if k is not None and t is not None else None for k, t in zip(keys, rowtimes, strict=True)
            ]
            ranges = scan_ranges(batch, spec["range"], keys, rowtimes, own, durations)
            history: list[list[bytes]] = [[] for _ in range(n)]
            for table in {t for t in tables if t}:
                if table not in stores:
                    name = TableName(spec["project"], spec["instance"], table)
                    stores[table] = open_store(name, spec)
                mine = [r if tables[i] == table else None for i, r in enumerate(ranges)]
                rows, unread, errors = scan_all(stores[table], mine, [QUALIFIER], spec["capacity"])
                if errors:
                    log.warning("Longbow+: %d row(s) read no history from %s: %s", len(unread), table, errors[0])
                counts["failed_on_read_document"] += len(unread)
                found, skipped = sorted(rows), set(unread)
                for i, span in enumerate(mine):
                    if span is None or i in skipped:
                        continue
                    hits = found[bisect.bisect_left(found, span[0]) : bisect.bisect_right(found, span[1])]
                    counts["success_on_read_document"] += 1
                    counts["documents_read_per_scan"] += len(hits)
                    history[i] = [rows[k][qualifier] for k in hits if qualifier in rows[k]]
            counts["rows_without_key"] = sum(1 for i in range(n) if ranges[i] is None or not tables[i])
            metrics.add(counts, [t for store in stores.values() for t in store.take_timings()])
            column = pa.array(history, type=arrow_schema.field(PROTO_DATA).type)
            yield pa.RecordBatch.from_arrays([*batch.columns, column], schema=arrow_schema)
    finally:
        for store in stores.values():
            store.close()
