"""Column pruning of Kafka sources: only the fields the SQL names are decoded."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, message_factory

from dagger.schema.descriptor_sets import build_pool
from dagger.schema.projection import prune_message, source_fields
from dagger.sql.rewrite import referenced_columns
from tests.conftest import job, kafka_stream

EXAMPLES = Path(__file__).resolve().parents[3] / "descriptors" / "examples.desc"
BOOKING = "dagger.examples.BookingLogMessage"


def _fds() -> descriptor_pb2.FileDescriptorSet:
    return descriptor_pb2.FileDescriptorSet.FromString(EXAMPLES.read_bytes())


def _message(fds: descriptor_pb2.FileDescriptorSet, name: str):  # noqa: ANN202
    return build_pool(fds).FindMessageTypeByName(name)


def test_referenced_columns_counts_every_name_and_only_a_real_star_means_everything():
    assert referenced_columns("SELECT Order_Number, COUNT(*) AS n FROM t GROUP BY order_number") == {
        "order_number",
        "n",
        "t",
    }
    assert referenced_columns("SELECT driver_pickup_location.latitude FROM t") >= {"driver_pickup_location"}
    assert referenced_columns("SELECT t.* FROM t") is None
    assert referenced_columns("SELECT to_json(struct(*)) FROM t") is None
    assert referenced_columns("SELECT * FROM (SELECT a FROM t)") is None


def test_source_fields_keep_named_fields_and_rowtime_and_nothing_when_all_are_named():
    booking = _message(_fds(), BOOKING)
    used = referenced_columns(
        "SELECT ORDER_NUMBER, driver_pickup_location.latitude FROM t WHERE amount_paid_by_cash > 1"
    )
    assert source_fields(booking, used, 5) == [
        "order_number",
        "event_timestamp",
        "driver_pickup_location",
        "amount_paid_by_cash",
    ]
    assert source_fields(booking, None, 5) is None
    everything = {f.name for f in booking.fields}
    assert source_fields(booking, everything, 5) is None


def test_pruned_message_keeps_field_numbers_and_reindexes_oneofs():
    fds = prune_message(_fds(), "dagger.test.Everything", ["f_optional", "choice_number", "f_string"])
    everything = _message(fds, "dagger.test.Everything")
    assert [(f.name, f.number) for f in everything.fields] == [
        ("f_string", 14),
        ("f_optional", 28),
        ("choice_number", 30),
    ]
    assert [o.name for o in everything.oneofs] == ["choice", "_f_optional"]
    only_optional = _message(prune_message(_fds(), "dagger.test.Everything", ["f_optional"]), "dagger.test.Everything")
    assert [o.name for o in only_optional.oneofs] == ["_f_optional"]
    assert only_optional.fields_by_name["f_optional"].containing_oneof.name == "_f_optional"
    # the original set is untouched and other messages keep their fields
    assert len(_message(_fds(), "dagger.test.Everything").fields) == 34
    assert len(_message(fds, BOOKING).fields) == 13
    with pytest.raises(KeyError, match="dagger.test.Nope"):
        prune_message(_fds(), "dagger.test.Nope", ["x"])


def test_the_reader_decodes_only_the_kept_fields_and_validates_what_it_reads():
    from dagger.formats.proto import Proto
    from dagger.kafka.source.spec import KafkaSourceSpec, decoder_for

    full = _message(_fds(), BOOKING)
    cls = message_factory.GetMessageClass(full)
    record = cls(order_number="o-1", customer_id="c-1", amount_paid_by_cash=42)
    record.metadata["k"] = "v"
    record.event_timestamp.seconds = 1_700_000_000
    good = record.SerializeToString()
    # customer_id (field 4) holding invalid UTF-8: a defect only in a field the job does not read
    bad_unread = good + b"\x22\x02\xff\xfe"
    spec = KafkaSourceSpec(
        table="t",
        topic_pattern="x",
        client_config={},
        records=Proto.options_for(EXAMPLES.read_bytes(), BOOKING, 5),
        fields=["order_number", "event_timestamp", "amount_paid_by_cash"],
    )
    result = decoder_for(spec).decode([good, bad_unread, b"\x0a\x05ab"])
    assert result.batch.schema.names == [
        "order_number",
        "event_timestamp",
        "amount_paid_by_cash",
        "__internal_validation_field__",
        "rowtime",
    ]
    assert result.batch.column("order_number").to_pylist() == ["o-1", "o-1", ""]
    assert result.batch.column("amount_paid_by_cash").to_pylist() == [42, 42, 0]
    assert result.invalid == [2]  # a truncated record is still caught
    unpruned = decoder_for(KafkaSourceSpec(**{**spec.__dict__, "fields": None}))
    assert len(unpruned.decode([good]).batch.schema) == 15
    assert unpruned.decode([bad_unread]).invalid == [0]


def _manager(stencil, broker, sql: str, **extra):  # noqa: ANN202
    from dagger.job import Job, load_config

    data = job(stencil, [kafka_stream(broker, "unused")], sql, **extra)
    return Job(load_config(data=data))
