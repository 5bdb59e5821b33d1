"""``dagger generate``: synthetic records of any message type, checked with python-protobuf and on the broker."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
from google.protobuf import message_factory

from dagger.errors import DaggerConfigError
from dagger.generate import MALFORMED, RecordGenerator
from dagger.schema.descriptor_sets import DescriptorSet

ROOT = Path(__file__).resolve().parents[2]
START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def descriptors():
    return DescriptorSet([("examples.desc", (ROOT / "descriptors" / "examples.desc").read_bytes())])


def _decoded(descriptor, values):
    cls = message_factory.GetMessageClass(descriptor)
    return [cls.FromString(v) for v in values]


def test_every_field_is_filled_by_its_type(descriptors):
    descriptor = descriptors.find_message("dagger.test.Everything")
    generator = RecordGenerator(descriptor, seed=3, start=START, events_per_second=4, vocabulary=5)
    messages = _decoded(descriptor, generator.batch(200).to_pylist())
    colors = {"RED", "GREEN", "BLUE"}
    for m in messages:
        for name in ("f_inner", "event_timestamp", "f_int64_wrapper", "f_string_wrapper", "f_duration", "f_struct"):
            assert m.HasField(name), name
        assert m.f_string.startswith("f_string-") and m.f_bytes.startswith(b"f_bytes-")
        assert descriptor.fields_by_name["f_enum"].enum_type.values_by_number[m.f_enum].name in colors
        assert 1 <= len(m.f_inners) <= 3 and 1 <= len(m.f_strings) <= 3 and 1 <= len(m.f_timestamps) <= 3
        assert 1 <= len(m.f_map) <= 3 and 1 <= len(m.f_map_msg) <= 3
        assert all(inner.label.startswith("label-") and inner.values for inner in m.f_map_msg.values())
        assert m.WhichOneof("choice") in ("choice_text", "choice_number")  # exactly one member of the oneof
        assert m.HasField("f_optional")
    # a small vocabulary per string field: keys repeat, and only the vocabulary's words occur
    strings = {m.f_string for m in messages}
    assert strings <= {f"f_string-{k}" for k in range(5)} and len(strings) > 1
    assert {m.WhichOneof("choice") for m in messages} == {"choice_text", "choice_number"}


def test_event_time_advances_at_the_rate_across_batches_and_the_seed_repeats(descriptors):
    descriptor = descriptors.find_message("dagger.examples.BookingLogMessage")

    def make(seed):
        return RecordGenerator(descriptor, seed=seed, start=START, events_per_second=4)

    generator = make(7)
    first, second = generator.batch(6).to_pylist(), generator.batch(6).to_pylist()
    stamps = [m.event_timestamp.ToDatetime(dt.UTC) for m in _decoded(descriptor, first + second)]
    assert stamps == [START + dt.timedelta(milliseconds=250 * i) for i in range(12)]
    again = make(7)
    assert again.batch(6).to_pylist() == first and again.batch(6).to_pylist() == second
    assert make(8).batch(6).to_pylist() != first


def test_malformed_ratio_replaces_records_with_bytes_the_decoder_rejects(descriptors):
    from dagger.serde.decode import ProtoDecoder

    descriptor = descriptors.find_message("dagger.examples.BookingLogMessage")
    values = RecordGenerator(descriptor, seed=1, start=START, malformed_ratio=0.25).batch(4000).to_pylist()
    bad = [i for i, v in enumerate(values) if v == MALFORMED]
    assert 800 <= len(bad) <= 1200
    result = ProtoDecoder(descriptor, rowtime_field_number=5).decode(values)
    assert result.invalid == bad  # exactly the malformed records are refused, every other one decodes


def test_bad_generator_settings_are_named(descriptors):
    descriptor = descriptors.find_message("dagger.examples.BookingLogMessage")
    with pytest.raises(DaggerConfigError, match=r"event timestamp field 'order_number' is not a Timestamp field"):
        RecordGenerator(descriptor, timestamp_field="order_number")
    with pytest.raises(DaggerConfigError, match="malformed ratio must be between 0 and 1"):
        RecordGenerator(descriptor, malformed_ratio=2)


@pytest.mark.integration
def test_cli_generates_a_jobs_stream_over_partitions_and_throttles(broker, stencil, topic, tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    from dagger.cli import main
    from testing.produce import consume_all

    target = f"generated-{time.monotonic_ns()}"
    config = json.loads((ROOT / "configs" / "quickstart.json").read_text())
    config["STREAMS"][0]["SOURCE_KAFKA_TOPIC_NAMES"] = target
    config["STREAMS"][0]["SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS"] = broker.bootstrap
    config["SCHEMA_REGISTRY_STENCIL_URLS"] = stencil.url("examples.desc")
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    args = ["generate", "--config", str(path), "--count", "3000", "--partitions", "3", "--rate", "2000"]
    assert main([*args, "--start", "2026-11-22T10:00:00Z", "--events-per-second", "100"]) == 0
    records = consume_all(broker.bootstrap, target, expected=3000)
    assert len(records) == 3000
    by_partition = {p: sum(1 for r in records if r.partition() == p) for p in range(3)}
    assert by_partition == {0: 1000, 1: 1000, 2: 1000}
    # the end offsets are exact (each partition ends with a single-record batch), so a bounded job sees all
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets"})
    ends = [reader.get_watermark_offsets(TopicPartition(target, p), timeout=10)[1] for p in range(3)]
    reader.close()
    assert ends == [1000, 1000, 1000]
    Booking = message_factory.GetMessageClass(  # noqa: N806
        DescriptorSet([("x", (ROOT / "descriptors" / "examples.desc").read_bytes())]).find_message(
            "dagger.examples.BookingLogMessage"
        )
    )
    stamps = sorted(Booking.FromString(r.value()).event_timestamp.ToDatetime(dt.UTC) for r in records)
    assert stamps[0] == START and stamps[-1] == START + dt.timedelta(seconds=29.99)
    # --rate 2000: 3000 records are spread over about 1.5 s of produce time, not sent in one burst
    produced_at = sorted(r.timestamp()[1] for r in records)
    assert produced_at[-1] - produced_at[0] >= 1200
    with pytest.raises(SystemExit):
        main(["generate", "--count", "x"])
    assert main(["generate", "--topic", "t"]) == 2  # --message, --bootstrap-servers, --stencil-url missing
