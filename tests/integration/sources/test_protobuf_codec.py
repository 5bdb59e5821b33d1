"""A protobuf job in micro-batches, decoded and encoded by Dagger's codec in the JVM (``SPARK_PROTOBUF_CODEC=jvm``,
the default) and by ptars in Python workers (``ptars``): the same records written, the same records dropped, and
the JVM's plan holds Dagger's expressions (``dagger_protobuf``, ``dagger_to_protobuf``) and no Python source
decoding."""

from __future__ import annotations

import pytest

from testing.produce import produce
from testing.samples import bookings, message_class
from tests.conftest import START, dropped, job, kafka_sink, kafka_stream, output_rows, run_job

pytestmark = pytest.mark.integration
Booking = message_class("dagger.examples.BookingLogMessage")
SQL = "SELECT * FROM data_stream_0 WHERE amount_paid_by_cash <> 70"


def _plan(query) -> str:
    return query._jsq.explainInternal(True)


def test_the_jvm_codec_writes_what_ptars_writes_and_its_plan_holds_daggers_expressions(
    spark, broker, stencil, topic, tmp_path
):
    source = topic("codec-in", 2)
    values = bookings(240, START)
    broken = [b"\xff\xff\xff not a booking", b"\x0a\x05ab"]  # a bad tag; a string longer than what is left
    produce(broker.bootstrap, source, ((None, v) for v in values[:120] + broken + values[120:]), partitions=2)
    written, plans = {}, {}
    for codec in ("jvm", "ptars"):
        out = topic(f"codec-out-{codec}")
        stream = kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")
        data = job(
            stencil,
            [stream],
            SQL,
            SPARK_PROTOBUF_CODEC=codec,
            **kafka_sink(broker, out, "dagger.examples.BookingLogMessage"),
        )
        manager, query = run_job(spark, data, tmp_path / f"cp-{codec}")
        assert query.exception() is None, query.exception()
        assert dropped(query) == 2
        records = output_rows(broker, manager, out, expected=239)
        written[codec] = sorted(Booking.FromString(m.value()).SerializeToString(deterministic=True) for m in records)
        plans[codec] = _plan(query)
    assert len(written["jvm"]) == 239  # 240 bookings but the one of 70 in cash
    assert written["jvm"] == written["ptars"]
    expected = sorted(
        Booking.FromString(v).SerializeToString(deterministic=True)
        for v in values
        if Booking.FromString(v).amount_paid_by_cash != 70
    )
    assert written["jvm"] == expected
    assert "dagger_protobuf(" in plans["jvm"] and "dagger_to_protobuf(" in plans["jvm"], plans["jvm"][-3000:]
    assert "dagger_protobuf(" not in plans["ptars"] and "dagger_to_protobuf(" not in plans["ptars"]
