"""Records held in memory, read by the Kafka source's own code (dagger.kafka.source.memory): the decoding, the
invalid-record policy and the dead letters of records fetched from a broker, with no broker."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, message_factory

from dagger.errors import InvalidRecordError
from dagger.formats.proto import Proto
from dagger.kafka.source.memory import MemoryDataSource, MemoryFetcher, MemoryRecord
from dagger.kafka.source.partitions import KafkaPartition, read_partition
from dagger.kafka.source.spec import KafkaSourceSpec
from dagger.schema.descriptor_sets import build_pool
from dagger.session.spark import use_data_source

EXAMPLES = Path(__file__).resolve().parents[4] / "descriptors" / "examples.desc"
BOOKING = "dagger.examples.BookingLogMessage"


def _booking(i: int) -> bytes:
    fds = descriptor_pb2.FileDescriptorSet.FromString(EXAMPLES.read_bytes())
    cls = message_factory.GetMessageClass(build_pool(fds).FindMessageTypeByName(BOOKING))
    record = cls(order_number=f"o-{i}", amount_paid_by_cash=i)
    record.event_timestamp.seconds = 1_700_000_000 + i
    return record.SerializeToString()


def _spec(policy: str, dead_letters: Path | None = None) -> KafkaSourceSpec:
    return KafkaSourceSpec(
        table="bookings",
        topic_pattern="bookings",
        client_config={"bootstrap.servers": "memory"},
        records=Proto.options_for(EXAMPLES.read_bytes(), BOOKING, 5),
        fields=["order_number", "event_timestamp", "amount_paid_by_cash"],
        invalid_policy=policy,
        dead_letter={"job": "j", "path": str(dead_letters)} if dead_letters else None,
        read_batch_size=2,  # several fetches for one range
    )


#: offsets 10, 11, 13, 14, 15 (a gap, as compaction leaves); the record at 13 is not a booking
RECORDS = [
    MemoryRecord(_booking(0), b"k0", 10, 1000),
    MemoryRecord(_booking(1), None, 11, 1001),
    MemoryRecord(b"\x0a\x05ab", b"bad", 13, 1003),
    MemoryRecord(_booking(3), None, 14, 1004),
    MemoryRecord(_booking(4), None, 15, 1005),
]


def _read(spec: KafkaSourceSpec, start: int = 10, end: int = 16) -> list[dict]:
    part = KafkaPartition("bookings", 3, start, end)
    batches = list(read_partition(spec, part, MemoryFetcher(RECORDS, start)))
    return [row for batch in batches for row in batch.to_pylist()]


def test_the_records_are_decoded_in_fetches_and_a_bad_one_is_kept_invalid_under_drop():
    rows = _read(_spec("drop"))
    assert [r["order_number"] for r in rows] == ["o-0", "o-1", "", "o-3", "o-4"]
    assert [r["__internal_validation_field__"] for r in rows] == [True, True, False, True, True]
    assert rows[4]["amount_paid_by_cash"] == 4


def test_a_range_reads_only_its_offsets():
    assert [r["order_number"] for r in _read(_spec("drop"), start=11, end=14)] == ["o-1", ""]


def test_a_bad_record_under_fail_is_named_by_its_topic_partition_and_offset():
    with pytest.raises(InvalidRecordError, match="record at topic bookings partition 3 offset 13 cannot be decoded"):
        _read(_spec("fail"))


def test_a_bad_record_under_dead_letter_is_written_with_its_bytes_key_and_offset(tmp_path):
    rows = _read(_spec("dead-letter", tmp_path))
    assert len(rows) == 5
    (written,) = list(tmp_path.glob("*.jsonl"))
    (letter,) = [json.loads(line) for line in written.read_text().splitlines()]
    assert letter["coordinates"] == {"topic": "bookings", "partition": 3, "offset": 13, "message": BOOKING}
    assert (
        base64.b64decode(letter["value_base64"]) == b"\x0a\x05ab" and base64.b64decode(letter["key_base64"]) == b"bad"
    )
    assert letter["reason"].startswith(f"not a valid {BOOKING}")


def test_offsets_out_of_order_are_refused():
    with pytest.raises(ValueError, match="increasing offsets"):
        MemoryFetcher([MemoryRecord(b"", None, 2), MemoryRecord(b"", None, 1)])


def test_the_memory_data_source_gives_the_table_the_kafka_source_gives(spark):
    """Spark reads the records through the ``dagger-kafka-memory`` data source: one task per topic-partition, the
    same decoding (here under ``drop``: the bad record is kept, marked invalid, for the job to count and drop)."""
    from dagger.kafka.source.decoded import decoded_table
    from dagger.kafka.source.memory import records_option

    spec = _spec("drop")
    records = {("bookings", 3): RECORDS, ("bookings", 0): [MemoryRecord(_booking(9), None, 0, 5)]}
    df = (
        spark.read.format(use_data_source(spark, MemoryDataSource))
        .option("spec", spec.to_option())
        .option("records", records_option(records))
    )
    rows = decoded_table(df.load(), spec).collect()
    got = sorted((r["order_number"], r["__internal_validation_field__"]) for r in rows)
    assert got == [("", False), ("o-0", True), ("o-1", True), ("o-3", True), ("o-4", True), ("o-9", True)]


def test_avro_records_in_memory_are_decoded_in_the_jvm_as_from_kafka(spark):
    import io

    import fastavro

    from dagger.kafka.source.decoded import decoded_table
    from dagger.kafka.source.memory import records_option

    schema = {"type": "record", "name": "O", "fields": [{"name": "n", "type": "string"}, {"name": "x", "type": "long"}]}
    values = []
    for i in range(3):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"n": f"o-{i}", "x": i})
        values.append(out.getvalue())
    spec = KafkaSourceSpec(
        table="orders",
        topic_pattern="orders",
        client_config={"bootstrap.servers": "memory"},
        invalid_policy="drop",
        data_type="AVRO",
        records={
            "reader": json.dumps(schema),
            "writers": {"0": json.dumps(schema)},
            "rowtime_source": None,
            "confluent": None,
        },
    )
    held = [MemoryRecord(v, None, i) for i, v in enumerate([*values, b"\x02"])]  # the last: a string cut short
    df = (
        spark.read.format(use_data_source(spark, MemoryDataSource))
        .option("spec", spec.to_option())
        .option("records", records_option({("orders", 0): held}))
    )
    rows = decoded_table(df.load(), spec).collect()
    assert [(r["n"], r["x"], r["__internal_validation_field__"]) for r in rows] == [
        ("o-0", 0, True),
        ("o-1", 1, True),
        ("o-2", 2, True),
        (None, None, False),
    ]
