"""The table of a Kafka stream from what the ``dagger-kafka`` reader emits (runs on the driver): the reader's own
columns, or the records it handed over to be decoded in the JVM (protobuf and Avro)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.kafka.source.spec import KafkaSourceSpec


def decoded_table(df: DataFrame, spec: KafkaSourceSpec) -> DataFrame:
    """The stream's table from what the reader emits (runs on the driver): the reader's columns as they are, or,
    for Avro, the values the reader handed over decoded in the JVM."""
    dead_letter = spec.dead_letter if spec.invalid_policy == "dead-letter" else None
    if spec.jvm_decode:
        from dagger.serde.proto_jvm import proto_table  # start-up: loads numpy, pyarrow

        return proto_table(
            df,
            spec.descriptor_set_b64,
            spec.message_name,
            spec.table,
            spec.invalid_policy,
            spec.rowtime,
            spec.rowtime_name,
            spec.fields,
            dead_letter,
        )
    if spec.data_type != "AVRO":
        return df
    from dagger.serde.avro_decode import avro_table  # start-up: loads numpy, pyarrow

    writers = {int(k): v for k, v in (spec.avro_writers or {}).items()}
    return avro_table(
        df,
        writers,
        spec.avro_reader,
        spec.table,
        spec.invalid_policy,
        spec.rowtime,
        spec.rowtime_name,
        spec.fields,
        dead_letter,
        framed=spec.confluent is not None,
    )
