"""Protobuf records read by Spark's Kafka source (real-time mode, ``SPARK_KAFKA_CONNECTOR``), decoded by Dagger's
decoder in the JVM into the stream's table (runs on the driver, planning; the query then runs in the JVM alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.serde.jvm_frames import RECORD, decoded_table, record_at
from dagger.serde.proto_jvm import ERROR, proto_record, record_names
from dagger.session.pandas_free import lit

if TYPE_CHECKING:
    from dagger.plugins.format import TableRead


def kafka_table(
    raw: Any,
    descriptor_set: bytes,
    message: str,
    fields: list[str] | None,
    paths: dict[int, list[int]] | None,
    where: TableRead,
    rowtime_field: str | None,
) -> Any:
    """Spark's Kafka source's rows (``value``, ``topic``, ``partition``, ``offset``) → the table, decoded by
    Dagger's decoder in the JVM. With ``paths`` (Confluent's format: schema id → the message's index path) the
    header is read there too: its schema id must be one of the subject's versions the job read at start (another
    one stops the query, saying to restart, under any policy: a version registered since is read after a restart).
    ``where``: the stream's table, invalid-record policy and rowtime column."""
    from pyspark.sql import functions as F

    table = where.table
    spark = raw.sparkSession
    decoded = proto_record(spark, F.col("value"), descriptor_set, message, fields, confluent=paths)
    names = record_names(spark, descriptor_set, message, fields)
    reason = F.col(f"{RECORD}.{ERROR}")
    unknown = F.concat(
        lit("InvalidRecordError: "),
        record_at(table),
        lit(": "),
        reason,
        lit(
            ". If the subject has a version registered since the job started, restart the job: it resumes from its "
            "checkpoint and reads every version the subject has then; nothing is lost"
        ),
    )
    if paths is not None:  # an unknown id is never a record to drop: a newer version of the subject's schema
        reason = F.when(reason.startswith("schema id "), F.raise_error(unknown)).otherwise(reason)
    return decoded_table(
        raw,
        decoded,
        reason,
        names,
        table,
        where.policy,
        where.rowtime,
        rowtime_field,
        where.dead_letter,
        coordinates=("topic", "partition", "offset"),
        payload="value",
        named={"message": message},
    )
