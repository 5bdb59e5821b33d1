"""Admission control of the Kafka reader: what each micro-batch takes (no Spark needed, a real broker)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from dagger.formats.proto import Proto
from dagger.kafka.source.reader import KafkaStreamReader
from dagger.kafka.source.spec import KafkaSourceSpec, positions
from testing.produce import produce

EXAMPLES = Path(__file__).resolve().parents[4] / "descriptors" / "examples.desc"


def _reader(broker, topic: str, read_batch_size: int) -> KafkaStreamReader:
    spec = KafkaSourceSpec(
        table="t",
        topic_pattern=topic,
        client_config={
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        },
        records=Proto.options_for(EXAMPLES.read_bytes(), "dagger.examples.BookingLogMessage", 5),
        read_batch_size=read_batch_size,
    )
    return KafkaStreamReader(spec)


def test_the_first_batch_after_a_start_is_one_read_batch_per_partition_then_the_backlog(broker, topic):
    name = topic("admit", partitions=2)
    produce(broker.bootstrap, name, [(None, b"")] * 600, partitions=2)
    reader = _reader(broker, name, read_batch_size=40)
    try:
        start = reader.initialOffset()
        assert start == {"@table": "t", f"{name}:0": 0, f"{name}:1": 0}  # offsets name their stream
        first = reader.latestOffset(start, ReadAllAvailable())
        assert first == {"@table": "t", f"{name}:0": 40, f"{name}:1": 40}  # quick first output, even from a cold JVM
        second = reader.latestOffset(first, ReadAllAvailable())
        assert second == {"@table": "t", f"{name}:0": 300, f"{name}:1": 300}  # then everything available
        capped = positions(reader.latestOffset(first, ReadMaxRows(100)))
        assert sum(capped.values()) - sum(positions(first).values()) == 100  # SPARK_MAX_RECORDS_PER_TRIGGER holds
    finally:
        reader.stop()
    produce(broker.bootstrap, name, [(None, b"")] * 200, partitions=2)
    restarted = _reader(broker, name, read_batch_size=40)  # a restart from a checkpoint starts small again
    try:
        assert restarted.latestOffset(second, ReadAllAvailable()) == {"@table": "t", f"{name}:0": 340, f"{name}:1": 340}
    finally:
        restarted.stop()
    available_now = _reader(broker, name, read_batch_size=40)
    try:
        available_now.prepareForTriggerAvailableNow()
        assert available_now.latestOffset(start, ReadAllAvailable()) == {
            "@table": "t",
            f"{name}:0": 400,
            f"{name}:1": 400,
        }
    finally:
        available_now.stop()
    # a checkpoint written before offsets named their stream still reads
    legacy = _reader(broker, name, read_batch_size=40)
    try:
        assert positions(legacy.latestOffset(positions(second), ReadAllAvailable())) == positions(second) | {
            f"{name}:0": 340,
            f"{name}:1": 340,
        }
    finally:
        legacy.stop()
