"""``dagger generate``: synthetic records of any message type, checked with python-protobuf and on the broker."""

from __future__ import annotations

import datetime as dt
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
