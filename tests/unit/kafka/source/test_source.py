"""The spec a Kafka stream's reader is given (:meth:`KafkaSource.spec`, no Spark) and what the reader plans from it,
with no broker: every offset a plan needs is given."""

from __future__ import annotations

from dagger.job import load_config
from dagger.kafka.source import KafkaSource
from dagger.kafka.source.reader import KafkaStreamReader
from dagger.kafka.source.spec import KafkaSourceSpec
from dagger.plugins.source import SourceEnv
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE, STREAM


def _spec(stream: dict | None = None, **keys: str) -> KafkaSourceSpec:
    config = load_config(data={**BASE, "STREAMS": [stream or STREAM], **keys})
    spec = KafkaSource().spec(config.STREAMS[0], SourceEnv(None, config, example_descriptors()))
    return KafkaSourceSpec.from_option(spec.to_option())  # as the reader gets it


def test_a_micro_batch_reads_its_partitions_in_tasks_of_about_spark_kafka_records_per_task_records():
    spec = _spec(SPARK_KAFKA_RECORDS_PER_TASK="2500")
    assert spec.records_per_task == 2500
    start = {"@table": "bookings", **{f"bookings-1:{p}": 0 for p in range(4)}}
    end = {"@table": "bookings", **{f"bookings-1:{p}": 1000 for p in range(4)}}
    planned = KafkaStreamReader(spec).partitions(start, end)
    assert sorted(len(task.ranges) for task in planned) == [2, 2]  # 4000 records: two tasks, not the default's one


def test_a_caught_up_partition_stops_holding_the_others_back_after_spark_partition_idle_timeout_ms():
    spec = _spec(SPARK_PARTITION_IDLE_TIMEOUT_MS="7000")
    assert spec.idle_timeout_ms == 7000
    assert KafkaStreamReader(spec)._aligned().idle_timeout == 7.0  # the event-time aligner it plans with (seconds)


def test_a_streams_dead_letter_topic_is_produced_to_source_kafka_dead_letter_brokers():
    stream = {
        **STREAM,
        "SOURCE_KAFKA_INVALID_RECORD_POLICY": "dead-letter",
        "SOURCE_KAFKA_DEAD_LETTER_TOPIC": "bookings-rejects",
        "SOURCE_KAFKA_DEAD_LETTER_BROKERS": "dead-letters:9093",
    }
    dead_letter = _spec(stream).dead_letter
    assert dead_letter["kafka_topic"] == "bookings-rejects"
    assert dead_letter["producer_config"]["bootstrap.servers"] == "dead-letters:9093"  # not the stream's 127.0.0.1:9092
