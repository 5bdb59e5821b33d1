"""``KAFKA_SOURCE`` / ``KAFKA_CONSUMER``: a stream read from Kafka topics by the ``dagger-kafka`` data source."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.kafka.client import client_config
from dagger.kafka.dead_letters import stream_dead_letters
from dagger.kafka.source.driver import consumer_config, driver_reader
from dagger.kafka.source.settings import KafkaSourceSettings
from dagger.kafka.source.spark import kafka_stream
from dagger.kafka.spark_connector import stream_refusals
from dagger.plugins.format import FormatEnv, TableRead, format_of
from dagger.plugins.source import Source, SourceEnv
from dagger.schema.confluent import ConfluentSettings
from dagger.session.spark import use_data_source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig


class KafkaSource(Source):
    """Topics matched by ``SOURCE_KAFKA_TOPIC_NAMES``, decoded as ``INPUT_SCHEMA_PROTO_CLASS`` (or, with
    ``INPUT_DATATYPE=JSON``, as JSON objects of ``INPUT_SCHEMA_JSON_SCHEMA``; with ``AVRO``, by Spark's Avro reader;
    with ``INPUT_SCHEMA_WIRE_FORMAT=confluent``, behind Confluent's header with the registry's schemas)."""

    names = ("KAFKA_SOURCE", "KAFKA_CONSUMER")
    source_type = "UNBOUNDED"
    settings = KafkaSourceSettings
    replayable = True
    decodes_named_fields = True
    supports_real_time = True
    test_input = True

    def check(self, stream: StreamConfig) -> None:
        what = f"Kafka stream '{stream.INPUT_SCHEMA_TABLE}'"
        stream.settings.require(what, "SOURCE_KAFKA_TOPIC_NAMES", "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS")
        format_of(stream).check_keys(stream, what)
        self._check_positions(stream)

    def invalid_record_policy(self, stream: StreamConfig) -> str:
        return stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY

    def passing_invalid_records(self, stream: StreamConfig) -> StreamConfig:
        if "SOURCE_KAFKA_INVALID_RECORD_POLICY" in stream.keys_set:
            return stream
        dropping = stream.settings.model_copy(update={"SOURCE_KAFKA_INVALID_RECORD_POLICY": "drop"})
        return stream.model_copy(update={"settings": dropping})

    def dead_letter_topic(self, stream: StreamConfig) -> str | None:
        return stream.settings.SOURCE_KAFKA_DEAD_LETTER_TOPIC

    @staticmethod
    def _check_positions(stream: StreamConfig) -> None:
        from dagger.kafka.source.positions import (  # cycle: dagger.kafka.source.positions import(s) this module
            end_position,
            start_position,
        )

        table = stream.INPUT_SCHEMA_TABLE
        if stream.settings.SOURCE_KAFKA_STARTING_TIMESTAMP and stream.settings.SOURCE_KAFKA_STARTING_OFFSETS != "group":
            raise ValueError(
                f"stream '{table}' sets both SOURCE_KAFKA_STARTING_TIMESTAMP and SOURCE_KAFKA_STARTING_OFFSETS; "
                "keep one"
            )
        if stream.settings.SOURCE_KAFKA_ENDING_TIMESTAMP and stream.settings.SOURCE_KAFKA_ENDING_OFFSETS:
            raise ValueError(
                f"stream '{table}' sets both SOURCE_KAFKA_ENDING_TIMESTAMP and SOURCE_KAFKA_ENDING_OFFSETS; keep one"
            )
        try:
            start, end = start_position(stream), end_position(stream)
        except DaggerConfigError as exc:
            raise ValueError(str(exc)) from None
        if start.kind == "timestamp" and end is not None and end.kind == "timestamp":
            if start.timestamp_ms >= end.timestamp_ms:
                raise ValueError(
                    f"stream '{table}': SOURCE_KAFKA_STARTING_TIMESTAMP {start.describe()} is not before "
                    f"SOURCE_KAFKA_ENDING_TIMESTAMP {end.describe()}"
                )

    def reach(self, stream: StreamConfig, config: JobConfig) -> None:
        reader = driver_reader(stream, config)
        try:
            reader.reach()
        finally:
            reader.stop()

    def is_bounded(self, stream: StreamConfig, to_ms: int | None = None) -> bool:
        return bool(
            stream.settings.SOURCE_KAFKA_ENDING_OFFSETS
            or stream.settings.SOURCE_KAFKA_ENDING_TIMESTAMP
            or to_ms is not None
        )

    def location(self, stream: StreamConfig) -> str:
        return f"topics /{stream.settings.SOURCE_KAFKA_TOPIC_NAMES}/"

    def topics(self, stream: StreamConfig) -> str | None:
        return stream.settings.SOURCE_KAFKA_TOPIC_NAMES

    def label(self, stream: StreamConfig) -> str:
        """``SOURCE_KAFKA_NAME`` (Dagger's tag), else the table."""
        return stream.settings.SOURCE_KAFKA_NAME or stream.INPUT_SCHEMA_TABLE

    def input_description(
        self, spark: SparkSession, stream: StreamConfig, from_ms: int | None, to_ms: int | None
    ) -> dict[str, Any]:
        from dagger.kafka.source.positions import (  # cycle: dagger.kafka.source.positions import(s) this module
            end_position,
            start_position,
        )

        start, end = start_position(stream, from_ms), end_position(stream, to_ms)
        return {
            "table": stream.INPUT_SCHEMA_TABLE,
            "topics": stream.settings.SOURCE_KAFKA_TOPIC_NAMES,
            "start": start.describe(),
            "end": end.describe() if end else None,
        }

    def build(self, stream: StreamConfig, env: SourceEnv) -> DataFrame:
        from dagger.kafka.source.decoded import (
            decoded_table,  # cycle: dagger.kafka.source.decoded import(s) this module
        )
        from dagger.kafka.source.reader import (
            KafkaDataSource,  # cycle: dagger.kafka.source.reader import(s) this module
        )

        spark, config, descriptors, options = env.spark, env.config, env.descriptors, env.options
        if options.jvm_reader:  # Dagger's reader, its records read and decoded in the JVM
            return self._jvm_table(stream, env)
        if options.spark_kafka and not stream_refusals(stream, options.jvm_protobuf):  # Spark's Kafka source
            fields = (options.fields or {}).get(stream.INPUT_SCHEMA_TABLE)
            return kafka_stream(
                spark, stream, config, descriptors, options.resolve_offsets, fields, micro_batches=not options.real_time
            )
        spec = self.spec(stream, env)
        name = use_data_source(spark, KafkaDataSource)
        if options.bounded:
            df = spark.read.format(name).option("spec", spec.to_option()).load()
        else:
            df = spark.readStream.format(name).option("spec", spec.to_option()).load()
        return decoded_table(df, spec)  # the table, decoded in the JVM where the format decodes there

    def _jvm_table(self, stream: StreamConfig, env: SourceEnv) -> DataFrame:
        """The stream read by Dagger's reader in the JVM (:mod:`dagger.kafka.source.jvm`): planned by the reader's
        driver side here, its records read by the Java client and decoded by the stream's format as they are."""
        from dagger.kafka.source.jvm import jvm_stream  # cycle: dagger.kafka.source.jvm import(s) this module

        config, options = env.config, env.options
        spec = self.spec(stream, env)
        policy = stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY  # fail or drop: dead letters keep Dagger's reader
        fields = (options.fields or {}).get(stream.INPUT_SCHEMA_TABLE)
        where = TableRead(stream.INPUT_SCHEMA_TABLE, policy, config.FLINK_ROWTIME_ATTRIBUTE_NAME, fields)
        records = format_of(stream)
        decoding = records.jvm_reader_options(stream, env.descriptors, where)
        raw = jvm_stream(env.spark, spec, client_config(stream.settings, "spark_consumer"), decoding)
        return records.jvm_reader_table(raw, stream, env.descriptors, where)

    def check_reading(self, stream: StreamConfig, env: SourceEnv) -> None:
        self.spec(stream, env)

    def spec(self, stream: StreamConfig, env: SourceEnv) -> Any:
        """The reader's settings for ``stream`` (a :class:`~dagger.kafka.source.spec.KafkaSourceSpec`): client
        settings (TLS stores read), positions, dead letters; a config error names what is wrong. No Spark."""
        from dagger.kafka.source.positions import (  # cycle: dagger.kafka.source.positions import(s) this module
            end_position,
            start_position,
        )
        from dagger.kafka.source.spec import KafkaSourceSpec  # cycle: dagger.kafka.source.spec import(s) this module

        config, descriptors, options = env.config, env.descriptors, env.options

        records = format_of(stream)
        registry = asdict(ConfluentSettings.from_config(config)) if config.SCHEMA_REGISTRY_CONFLUENT_URL else None
        # Dagger's codecs decode in the JVM with SPARK_PROTOBUF_CODEC=jvm (auto: ptars in the reader's worker)
        env = FormatEnv(registry, options.jvm_protobuf and config.SPARK_PROTOBUF_CODEC == "jvm")
        reader_options = records.reader_options(stream, descriptors, env)
        conf = consumer_config(stream, config)
        if options.commit_offsets and not options.bounded and not commits_to_group(stream):
            logging.getLogger("dagger").warning(
                "stream '%s': offsets are not committed to consumer group %s "
                "(SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE=false): the checkpoint alone holds the position, and "
                "lag tools reading the group do not see the job (Dagger committed at each checkpoint whatever this "
                "key said; remove it to commit)",
                stream.INPUT_SCHEMA_TABLE,
                conf.get("group.id"),
            )
        dead_letter = None
        if stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY == "dead-letter":
            dead_letter = stream_dead_letters(stream, config)
        spec = KafkaSourceSpec(
            table=stream.INPUT_SCHEMA_TABLE,
            topic_pattern=stream.settings.SOURCE_KAFKA_TOPIC_NAMES,
            client_config=conf,
            rowtime=config.FLINK_ROWTIME_ATTRIBUTE_NAME,
            invalid_policy=stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY,
            dead_letter=asdict(dead_letter) if dead_letter else None,
            max_records_per_trigger=config.SPARK_MAX_RECORDS_PER_TRIGGER,
            read_batch_size=config.SPARK_KAFKA_READ_BATCH_SIZE,
            records_per_task=config.SPARK_KAFKA_RECORDS_PER_TASK,
            aligned_delay_ms=(
                config.FLINK_WATERMARK_DELAY_MS if config.event_time_alignment and options.event_time else None
            ),
            idle_timeout_ms=config.SPARK_PARTITION_IDLE_TIMEOUT_MS,
            unreachable_timeout_ms=stream.settings.SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS,
            first_contact_ms=config.SPARK_FIRST_CONTACT_TIMEOUT_MS,
            commit_offsets=options.commit_offsets and not options.bounded and commits_to_group(stream),
            fields=(options.fields or {}).get(stream.INPUT_SCHEMA_TABLE),
            data_type=stream.INPUT_DATATYPE,
            records=reader_options,
            hold_file=options.hold_file,
        )
        start, end = start_position(stream, options.from_ms), end_position(stream, options.to_ms)
        spec.start = asdict(start)
        spec.end = asdict(end) if end is not None else None
        low = start.timestamp_ms if start.kind == "timestamp" else None
        high = end.timestamp_ms if end is not None and end.kind == "timestamp" else None
        if low is not None and high is not None:
            spec.time_range = [low, high]
        if options.bounded and end is None:
            raise DaggerConfigError(f"stream '{stream.INPUT_SCHEMA_TABLE}' has no end position in a bounded run")
        return spec

    def finish(self, progress: dict[str, Any], streams: list[StreamConfig], config: JobConfig) -> None:
        """Commit each stream's last processed offsets to its own consumer group (matched by the stream's table,
        which tags its offsets, never by topic: two streams may read the same topic)."""
        from dagger.kafka.source.commits import (
            commit_final_offsets,  # cycle: dagger.kafka.source.commits import(s) this module
        )

        groups = {s.INPUT_SCHEMA_TABLE: consumer_config(s, config) for s in streams if commits_to_group(s)}
        commit_final_offsets(progress, groups)


def commits_to_group(stream: StreamConfig) -> bool:
    """Whether the stream's offsets go to its consumer group (``SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE`` is
    not ``false``)."""
    return stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE is not False
