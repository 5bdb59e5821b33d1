"""The hand-over to a decoder in the JVM, and the table made of what it decodes: shared by Avro
(:mod:`dagger.formats.avro.decode`) and protobuf (:mod:`dagger.serde.proto_jvm`).

* **Frames**: what our Python Kafka reader emits for a stream decoded in the JVM: each record's value, its writer
  schema id and where its payload starts (past Confluent's header), its coordinates, the validity flag (false for
  records the reader already found unusable: tombstones, bad headers, unknown ids) and an empty rowtime.
* **The table**: :func:`decoded_table` turns a column of decoded records (a struct) into the stream's table (the
  record's fields, the validity flag, rowtime) and applies the stream's invalid-record policy to the records the
  JVM could not decode: ``fail`` raises naming topic, partition and offset; ``drop`` flags them; ``dead-letter``
  writes them (their raw value, the reason, the coordinates) through one column-wise pass in Python workers.

Runs on the driver (planning); the dead-letter pass on executors.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dagger.dead_letter import DeadLetterSpec
from dagger.serde.types import VALIDITY_COLUMN
from dagger.session.pandas_free import lit

#: the columns the Python reader hands the JVM (then replaced by the table's)
SCHEMA_ID = "__dagger_schema_id"
PAYLOAD = "__dagger_payload"
START = "__dagger_start"
TOPIC = "__dagger_topic"
PARTITION = "__dagger_partition"
OFFSET = "__dagger_offset"
#: a decoded record's struct, while the table is made
RECORD = "__dagger_record"
#: why the JVM could not decode a record (null where it did)
REASON = "__dagger_reason"


def frames_schema(rowtime: str) -> StructType:
    """What the Python reader emits for a stream decoded in the JVM."""
    return StructType(
        [
            StructField(SCHEMA_ID, IntegerType(), True),
            StructField(PAYLOAD, BinaryType(), True),
            StructField(START, IntegerType(), True),
            StructField(TOPIC, StringType(), True),
            StructField(PARTITION, IntegerType(), True),
            StructField(OFFSET, LongType(), True),
            StructField(VALIDITY_COLUMN, BooleanType(), False),
            StructField(rowtime, TimestampType(), True),
        ]
    )


def frame_columns(
    ids: pa.Array, values: pa.Array, starts: pa.Array, coordinates: tuple[str, int, Any] | None, tail: list[pa.Array]
) -> list[pa.Array]:
    """The frames' columns for ``values`` (``tail``: the validity flag and rowtime)."""
    n = len(values)
    topic, partition, offsets = coordinates if coordinates is not None else ("", -1, pa.nulls(n, pa.int64()))
    return [
        ids,
        values.cast(pa.binary()) if values.type != pa.binary() else values,
        starts,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets, pa.int64()),
        *tail,
    ]


def record_at(table: str, coordinates: tuple[str, str, str] = ("topic", "partition", "offset")) -> Any:
    """``stream '<table>': record at topic T partition P offset O``: where a record is, for the errors that name it
    (``coordinates``: the columns holding topic, partition and offset)."""
    from pyspark.sql import functions as F

    topic, partition, offset = coordinates
    return F.concat(
        lit(f"stream '{table}': record at topic "),
        F.col(topic),
        lit(" partition "),
        F.col(partition).cast("string"),
        lit(" offset "),
        F.col(offset).cast("string"),
    )


def decoded_table(
    df: Any,
    decoded: Any,
    reason: Any,
    names: list[str],
    table: str,
    policy: str,
    rowtime: str,
    rowtime_field: str | None,
    dead_letter: dict[str, Any] | None = None,
    coordinates: tuple[str, str, str] = (TOPIC, PARTITION, OFFSET),
    payload: str = PAYLOAD,
    named: dict[str, str] | None = None,
) -> Any:
    """``df`` (frames, or Spark's Kafka source's rows) → the table: ``names`` of the struct ``decoded`` (a column of
    ``df``'s rows, computed once), the validity flag, rowtime (the ``rowtime_field`` of the record, a TIMESTAMP;
    the epoch where it is null or the record invalid). ``reason`` is an expression over the columns and
    :data:`RECORD` (the decoded struct): why a record was not decoded, null where it was. With ``dead_letter`` (a
    ``DeadLetterSpec``'s fields) the undecoded records are written there with their raw value (``payload``) and
    coordinates (``named`` adds to them: the message a protobuf record was read as)."""
    from pyspark.sql import functions as F

    valid = F.col(VALIDITY_COLUMN) if VALIDITY_COLUMN in df.columns else lit(True)
    df = df.withColumn(RECORD, F.when(valid, decoded))
    df = df.withColumn(REASON, F.when(valid, reason))
    if policy == "fail":
        message = F.concat(
            lit("InvalidRecordError: "),  # the runner's marker of our errors
            record_at(table, coordinates),
            lit(" cannot be decoded: "),
            F.col(REASON),
            lit(
                ". Set SOURCE_KAFKA_INVALID_RECORD_POLICY to 'drop' or 'dead-letter' to keep the job running past "
                "undecodable records."
            ),
        )
        # the record itself raises, so that every use of its fields does: a filter of the query on a decoded field
        # runs before the validity flag below is read (Spark pushes it down) and would drop the record unseen
        failed = F.col(REASON).isNotNull()
        df = df.withColumn(RECORD, F.when(failed, F.raise_error(message)).otherwise(F.col(RECORD)))
    ok = valid & F.col(REASON).isNull()
    if dead_letter is not None:
        keep = df.columns
        if VALIDITY_COLUMN not in keep:
            df = df.withColumn(VALIDITY_COLUMN, lit(True))
        df = df.mapInArrow(_dead_letters(dead_letter, table, payload, coordinates, named or {}), df.schema)
        ok = F.col(VALIDITY_COLUMN)
    epoch = lit(dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).cast("timestamp")
    if rowtime_field is None:
        stamp = lit(None).cast("timestamp")
    else:
        stamp = F.when(ok, F.coalesce(F.col(f"{RECORD}.`{rowtime_field}`").cast("timestamp"), epoch)).otherwise(epoch)
    columns = [F.col(f"{RECORD}.`{name}`").alias(name) for name in names]
    return df.select(*columns, ok.alias(VALIDITY_COLUMN), stamp.alias(rowtime))


def _dead_letters(
    spec: dict[str, Any], table: str, payload: str, coordinates: tuple[str, str, str], named: dict[str, str]
) -> Any:
    """A ``mapInArrow`` function (runs in Python workers) that writes the rows with a :data:`REASON` as dead
    letters and marks them invalid; every other row passes untouched."""
    topic_column, partition_column, offset_column = coordinates

    def run(batches: Any) -> Any:
        import pyarrow.compute as pc
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or -1) if context else -1
        writer = None
        for batch in batches:
            where = batch.schema.get_field_index(VALIDITY_COLUMN)
            bad = pc.and_(batch.column(where), pc.is_valid(batch.column(REASON)))
            if pc.any(bad).as_py():
                rows = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
                names = [REASON, payload, topic_column, partition_column, offset_column]
                picked = batch.take(pa.array(rows)).select(names).to_pylist()
                if writer is None:
                    writer = DeadLetterSpec(**spec).writer("source", table, batch_id, picked[0][partition_column])
                for row in picked:
                    coordinates = {
                        "topic": row[topic_column],
                        "partition": row[partition_column],
                        "offset": row[offset_column],
                        **named,
                    }
                    writer.write_record(row[payload], None, row[REASON], coordinates)  # the record's value as read
                batch = batch.set_column(where, VALIDITY_COLUMN, pc.and_(batch.column(where), pc.invert(bad)))
            yield batch
        if writer is not None:
            writer.flush()

    return run
