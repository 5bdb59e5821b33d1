"""A Kafka sink captured for ``dagger test`` (dagger.sinks.capture): its own writer and encoder run, the records
are kept in files instead of produced, and read back in order."""

from __future__ import annotations

import pyarrow as pa

from dagger.job import load_config
from dagger.sinks import build_sinks
from dagger.sinks.capture import read_spool
from dagger.testing.decoding import read_back
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE
from tests.unit.sinks.test_kafka import KAFKA


def test_a_captured_kafka_sink_keeps_what_its_encoder_wrote_per_batch_and_partition(tmp_path):
    (sink,) = build_sinks(load_config(data={**BASE, **KAFKA, "SINK_KAFKA_BROKERS": "nowhere:1"}), example_descriptors())
    sink.capture = str(tmp_path / "out")
    for batch_id, partition, numbers in [(1, 1, ["o-3"]), (0, 1, ["o-2"]), (0, 0, ["o-0", "o-1"])]:
        writer = sink.writer(partition, batch_id)
        writer.write(pa.record_batch({"order_number": numbers, "amount_paid_by_cash": [5] * len(numbers)}))
        assert writer.flush() == len(numbers)
    written = read_spool(sink.capture)
    assert [key for _, key in written] == [None] * 4
    records = read_back(sink.value, [value for value, _ in written])
    assert records == [{"order_number": f"o-{i}", "amount_paid_by_cash": "5"} for i in range(4)]


def test_nothing_captured_reads_as_no_records(tmp_path):
    assert read_spool(str(tmp_path / "never")) == []
