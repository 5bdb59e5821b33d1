"""The tests of tests/unit/kafka/source/test_event_time.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import datetime as dt
import logging
import uuid

import pytest

from dagger.kafka.source.event_time import EventTimeProbe
from testing.produce import consume_all, produce
from tests.conftest import START, job, kafka_sink, kafka_stream, run_job
from tests.unit.kafka.source.test_event_time import (
    COUNT_SQL,
    JOINED,
    PRE_FILTER,
    SECOND,
    T0,
    Booking,
    Count,
    _expected_minutes,
    _skewed,
    _statuses,
    _window_counts,
)


@pytest.mark.integration
def test_a_backlog_over_partitions_an_hour_apart_drops_nothing(spark, broker, stencil, topic, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dagger")
    source, times = _skewed(broker, topic)
    expected = _expected_minutes(times, dt.timedelta(seconds=10))
    sql = COUNT_SQL.format(where="true")
    # measured first: admitted by offsets alone (300 records per micro-batch, as Flink without per-partition
    # watermarks), the fast partition's first batch
    # moves the watermark an hour ahead and the slow partition's later records are dropped as late
    unaligned, late = _window_counts(
        broker,
        stencil,
        spark,
        tmp_path,
        source,
        sql,
        len(expected) - 15,
        SPARK_MAX_RECORDS_PER_TRIGGER=300,
        FLINK_WATERMARK_PER_PARTITION_ENABLE="false",  # Dagger's way to say it: one watermark across partitions
    )
    # Spark counts late rows after partial aggregation (one per window and key and task), so the records lost are
    # counted from the output: 900 of the slow partition's 1,200 here
    lost = sum(n for _, n in expected) - sum(n for _, n in unaligned)
    assert late > 0 and lost > 600
    assert f"late rows dropped {late} ({late} since start)" in caplog.text
    assert f"{late} row(s) arrived after the watermark had closed their window" in caplog.text
    caplog.clear()
    # aligned: the fast partition waits until the slow one has caught up; every window is exact
    aligned, late = _window_counts(
        broker, stencil, spark, tmp_path, source, sql, len(expected), SPARK_MAX_RECORDS_PER_TRIGGER=300
    )
    assert late == 0
    assert aligned == expected
    assert "late rows dropped" not in caplog.text


@pytest.mark.integration
def test_a_filter_that_keeps_one_record_in_a_thousand_still_closes_windows_on_time(
    spark, broker, stencil, topic, tmp_path
):
    source = topic("sparse")
    records = _statuses(START, 5000, "CREATED")
    produce(broker.bootstrap, source, ((None, v) for v in records))
    where = "order_number LIKE '%000'"  # orders 1000, 2000, 3000, 4000: one minute window each
    got, _ = _window_counts(broker, stencil, spark, tmp_path, source, COUNT_SQL.format(where=where), 4)
    ends = [START + dt.timedelta(seconds=s) + dt.timedelta(minutes=1) for s in (1000, 2000, 3000, 4000)]
    assert got == [(end.replace(second=0), 1) for end in ends]


@pytest.mark.integration
@pytest.mark.parametrize("where", ["pre-processor", "join"])
def test_filtered_records_close_windows_through_pre_processors_and_joins(
    spark, broker, stencil, topic, tmp_path, where
):
    source = topic("filtered")
    records = _statuses(START, 300, "COMPLETED") + _statuses(START + dt.timedelta(hours=2), 50, "CANCELLED", first=300)
    produce(broker.bootstrap, source, ((None, v) for v in records))
    out = f"counts-{uuid.uuid4().hex[:8]}"
    broker.create_topic(out, 1)
    streams = [kafka_stream(broker, source)]
    sink = kafka_sink(broker, out, "dagger.examples.BookingCountMessage")
    if where == "join":
        streams.append(kafka_stream(broker, source, table="data_stream_1"))
        data = job(stencil, streams, JOINED, **sink)
    else:
        sql = COUNT_SQL.format(where="true")
        data = job(
            stencil,
            streams,
            sql,
            PROCESSOR_PREPROCESSOR_ENABLE="true",
            PROCESSOR_PREPROCESSOR_CONFIG=PRE_FILTER,
            **sink,
        )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = [Count.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=5)]
    got = sorted((r.window_timestamp.ToDatetime(dt.UTC), r.booking_count) for r in rows)
    assert got == [(START + dt.timedelta(minutes=m), 60) for m in range(1, 6)]


@pytest.mark.integration
def test_records_the_where_filters_out_still_close_windows(spark, broker, stencil, topic, tmp_path):
    """Completed bookings for five minutes, then (hours later in event time) only cancelled ones: the last
    minute of completed bookings is emitted, because the cancelled ones moved the watermark past it."""
    source = topic("filtered")
    records = _statuses(START, 300, "COMPLETED") + _statuses(START + dt.timedelta(hours=2), 50, "CANCELLED", first=300)
    produce(broker.bootstrap, source, ((None, v) for v in records))
    got, late = _window_counts(
        broker, stencil, spark, tmp_path, source, COUNT_SQL.format(where="status = 'COMPLETED'"), 5
    )
    assert got == [(START + dt.timedelta(minutes=m), 60) for m in range(1, 6)]
    assert late == 0


@pytest.mark.integration
def test_the_probe_reads_event_times_at_offsets_from_the_broker(broker, topic):
    from dagger.formats.proto import Proto
    from dagger.kafka.source.spec import KafkaSourceSpec

    name = topic("probe", partitions=2)
    values = [Booking(order_number=f"o{i}") for i in range(40)]
    for i, m in enumerate(values):
        m.event_timestamp.FromDatetime(START + dt.timedelta(seconds=i))
    payloads = [m.SerializeToString() for m in values]
    payloads[7] = b"\xff\xff not a booking"  # partition 1, offset 3
    produce(broker.bootstrap, name, ((None, v) for v in payloads), partitions=2)
    from testing.samples import example_descriptors

    spec = KafkaSourceSpec(
        table="t",
        topic_pattern=name,
        client_config={"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"},
        records=Proto.options_for(example_descriptors().serialized, "dagger.examples.BookingLogMessage", 5),
    )
    probe = EventTimeProbe(spec)
    try:
        # records go round-robin: partition p, offset o holds record 2 * o + p
        got = probe.times({f"{name}:0": 5, f"{name}:1": 3})
        assert got == {f"{name}:0": T0 + 10 * SECOND, f"{name}:1": None}
        assert probe.times({f"{name}:0": 19, f"{name}:1": 0}) == {
            f"{name}:0": T0 + 38 * SECOND,
            f"{name}:1": T0 + SECOND,
        }
        assert probe.times({f"{name}:0": 20}) == {f"{name}:0": None}  # past the end
        rounds = probe.fetches
        probe.times({f"{name}:0": 5})
        assert probe.fetches == rounds  # cached by offset
    finally:
        probe.close()
