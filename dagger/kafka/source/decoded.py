"""The table of a Kafka stream from what the ``dagger-kafka`` reader emits (runs on the driver): the reader's own
columns, or the records it handed over to be decoded in the JVM by the stream's format (protobuf and Avro)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagger.plugins.format import TableRead

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.kafka.source.spec import KafkaSourceSpec


def decoded_table(df: DataFrame, spec: KafkaSourceSpec) -> DataFrame:
    """The stream's table from what the reader emits (runs on the driver): the reader's columns as they are, or the
    values the reader handed over, decoded in the JVM by the format (:meth:`~dagger.plugins.format.Format.jvm_table`)."""
    if not spec.decodes_in_jvm:
        return df
    dead_letter = spec.dead_letter if spec.invalid_policy == "dead-letter" else None
    where = TableRead(spec.table, spec.invalid_policy, spec.rowtime, spec.fields, dead_letter)
    return spec.format.jvm_table(df, spec.records, where)
