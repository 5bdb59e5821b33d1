"""Kafka start/end positions and `dagger run --from/--to` replays over Apache Kafka."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest

from dagger.errors import DaggerConfigError
from testing.produce import consume_all, produce_at
from testing.samples import bookings, message_class
from tests.conftest import dagger, job, kafka_sink, kafka_stream, run_job

pytestmark = pytest.mark.integration

Summary = message_class("dagger.examples.BookingSummaryMessage")
SUMMARY = "dagger.examples.BookingSummaryMessage"
T0 = dt.datetime(2026, 11, 1, 0, 0, tzinfo=dt.UTC)
SQL = "SELECT order_number FROM data_stream_0"


def _ms(instant: dt.datetime) -> int:
    return int(instant.timestamp() * 1000)


def _orders(bootstrap: str, topic: str, expected: int) -> list[str]:
    return sorted(Summary.FromString(m.value()).order_number for m in consume_all(bootstrap, topic, expected=expected))


def _hourly(count: int) -> list[tuple[int, bytes]]:
    """Booking i has event time and Kafka timestamp T0 + i minutes."""
    values = bookings(count, T0, step_seconds=60)
    return [(_ms(T0 + dt.timedelta(minutes=i)), v) for i, v in enumerate(values)]


def test_timestamp_seeks_land_on_the_first_record_at_or_after_the_instant(broker, topic):
    from confluent_kafka import Consumer, TopicPartition

    from dagger.kafka.source.positions import offsets_for_timestamp

    name = topic("seek")
    stamps = [1_000 * i for i in range(50)]
    produce_at(broker.bootstrap, name, [(s + 1_000_000, b"x") for s in stamps])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)
        assert (low, high) == (0, 50)
        marks = {f"{name}:0": (low, high)}
        found = {
            target: offsets_for_timestamp(consumer, marks, target, "t")[f"{name}:0"]
            for target in (0, 1_000_000, 1_020_000, 1_020_500, 1_049_000, 1_049_001)
        }
    finally:
        consumer.close()
    # before the first record: its offset; between two: the later one; after the last: the partition's end
    assert found == {0: 0, 1_000_000: 0, 1_020_000: 20, 1_020_500: 21, 1_049_000: 49, 1_049_001: 50}


def test_records_out_of_timestamp_order_inside_the_range_are_left_out(spark, broker, stencil, topic, tmp_path):
    from dagger.job import Job

    source, out = topic("ooo"), topic("ooo-out")
    # offset 4 carries a timestamp from before the range; the ends are found as Kafka's time index finds them (the
    # first offset whose timestamp is at or after the instant: 2 and 6)
    minutes = [0, 1, 2, 3, 0, 4, 6, 7]
    values = bookings(len(minutes), T0, step_seconds=60)
    produce_at(
        broker.bootstrap, source, [(_ms(T0 + dt.timedelta(minutes=m)), v) for m, v in zip(minutes, values, strict=True)]
    )
    from dagger.job import load_config

    config = load_config(data=job(stencil, [kafka_stream(broker, source)], SQL, **kafka_sink(broker, out, SUMMARY)))
    manager = Job(
        config,
        checkpoint_dir=str(tmp_path / "cp"),
        spark=spark,
        from_ms=_ms(T0 + dt.timedelta(minutes=2)),
        to_ms=_ms(T0 + dt.timedelta(minutes=6)),
    )
    run = manager.start()
    run.awaitTermination(300)
    assert run.exception() is None, run.exception()
    assert _orders(broker.bootstrap, out, expected=3) == ["order-2", "order-3", "order-5"]


def test_explicit_start_and_end_offsets_per_partition(spark, broker, stencil, topic, tmp_path):
    source, out = topic("offs", partitions=2), topic("offs-out")
    produce_at(broker.bootstrap, source, _hourly(40), partitions=2)  # even i → partition 0 offset i/2
    stream = kafka_stream(
        broker,
        source,
        SOURCE_KAFKA_STARTING_OFFSETS=json.dumps({source: {"0": 5, "1": -2}}),
        SOURCE_KAFKA_ENDING_OFFSETS=json.dumps({source: {"0": 10, "1": 3}}),
    )
    manager, run = run_job(spark, job(stencil, [stream], SQL, **kafka_sink(broker, out, SUMMARY)), tmp_path / "cp")
    assert run.exception() is None, run.exception()
    assert manager.bounded
    expected = sorted([f"order-{2 * o}" for o in range(5, 10)] + [f"order-{2 * o + 1}" for o in range(3)])
    assert _orders(broker.bootstrap, out, expected=8) == expected


def test_a_live_job_can_start_at_a_timestamp_or_at_the_end(spark, broker, stencil, topic, tmp_path):
    source, out, empty = topic("live-ts", partitions=2), topic("live-ts-out"), topic("live-latest-out")
    produce_at(broker.bootstrap, source, _hourly(60), partitions=2)
    stream = kafka_stream(broker, source, SOURCE_KAFKA_STARTING_TIMESTAMP="2026-11-01T00:50:00Z")
    manager, query = run_job(spark, job(stencil, [stream], SQL, **kafka_sink(broker, out, SUMMARY)), tmp_path / "a")
    assert query.exception() is None and not manager.bounded
    assert _orders(broker.bootstrap, out, expected=10) == sorted(f"order-{i}" for i in range(50, 60))

    stream = kafka_stream(broker, source, SOURCE_KAFKA_STARTING_OFFSETS="latest")
    _, query = run_job(spark, job(stencil, [stream], SQL, **kafka_sink(broker, empty, SUMMARY)), tmp_path / "b")
    assert query.exception() is None
    assert query.lastProgress["numInputRows"] == 0

    # earliest wins over the group's reset policy
    stream = kafka_stream(
        broker,
        source,
        SOURCE_KAFKA_STARTING_OFFSETS="earliest",
        SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET="latest",
    )
    _, query = run_job(spark, job(stencil, [stream], SQL, **kafka_sink(broker, empty, SUMMARY)), tmp_path / "c")
    assert query.exception() is None
    assert _orders(broker.bootstrap, empty, expected=60) == sorted(f"order-{i}" for i in range(60))


def test_replay_cli_reads_exactly_the_range_keeps_its_own_checkpoint_and_commits_nothing(
    broker, stencil, topic, tmp_path
):
    from confluent_kafka import Consumer, TopicPartition

    source, out = topic("replay", partitions=2), topic("replay-out")
    produce_at(broker.bootstrap, source, _hourly(60), partitions=2)
    group = f"live-{uuid.uuid4().hex[:6]}"
    stream = kafka_stream(broker, source, SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID=group)
    live_checkpoint = tmp_path / "cp" / "live"
    data = job(
        stencil, [stream], SQL, SPARK_CHECKPOINT_LOCATION=str(live_checkpoint), **kafka_sink(broker, out, SUMMARY)
    )
    config = tmp_path / "job.json"
    config.write_text(json.dumps(data))

    result = dagger("run", str(config), "--from", "2026-11-01T00:10:00Z", "--to", "2026-11-01T00:40:00Z")
    assert result.returncode == 0, result.stdout + result.stderr
    orders = _orders(broker.bootstrap, out, expected=30)
    assert orders == sorted(f"order-{i}" for i in range(10, 40)), result.stderr[-4000:]
    assert "replay 2026-11-01T00:10:00Z .. 2026-11-01T00:40:00Z with checkpoint" in result.stderr
    assert "bounded run done" in result.stderr and "30 rows read" in result.stderr
    assert "re-run over input already written" in result.stderr  # the Kafka sink says it duplicates
    replay_dir = tmp_path / "cp" / "live-replay-20261101T001000Z-20261101T004000Z"
    assert (replay_dir / "bounded" / "runs.json").exists()
    assert not live_checkpoint.exists()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(source, p) for p in (0, 1)], timeout=10)
    finally:
        consumer.close()
    assert all(tp.offset < 0 for tp in committed)  # the live job's group is untouched


def test_position_keys_and_replay_flags_are_validated(broker, stencil):
    import argparse

    from dagger.cli import _replay_range
    from dagger.job import load_config

    def load(**keys):
        return load_config(data=job(stencil, [kafka_stream(broker, "t", **keys)], SQL))

    with pytest.raises(
        DaggerConfigError, match="sets both SOURCE_KAFKA_STARTING_TIMESTAMP and SOURCE_KAFKA_STARTING_OFFSETS"
    ):
        load(SOURCE_KAFKA_STARTING_TIMESTAMP="2026-11-01T00:00:00Z", SOURCE_KAFKA_STARTING_OFFSETS="earliest")
    with pytest.raises(
        DaggerConfigError,
        match=r"SOURCE_KAFKA_STARTING_OFFSETS: 'first' is not a position; accepted: group, earliest, latest",
    ):
        load(SOURCE_KAFKA_STARTING_OFFSETS="first")
    with pytest.raises(DaggerConfigError, match=r"SOURCE_KAFKA_ENDING_OFFSETS: .* accepted: latest, or JSON offsets"):
        load(SOURCE_KAFKA_ENDING_OFFSETS='{"t": {"x": 1}}')
    with pytest.raises(DaggerConfigError, match=r"STARTING_TIMESTAMP 2026-11-02T00:00:00Z is not before"):
        load(
            SOURCE_KAFKA_STARTING_TIMESTAMP="2026-11-02T00:00:00Z", SOURCE_KAFKA_ENDING_TIMESTAMP="2026-11-01T00:00:00Z"
        )
    with pytest.raises(DaggerConfigError, match=r"'soon' is not an instant"):
        load(SOURCE_KAFKA_ENDING_TIMESTAMP="soon")
    from dagger.plugins.source import source_of

    (bounded,) = load(SOURCE_KAFKA_ENDING_OFFSETS="latest").STREAMS
    (live,) = load().STREAMS
    assert source_of(bounded).is_bounded(bounded) and not source_of(live).is_bounded(live)
    assert source_of(live).is_bounded(live, to_ms=1)  # dagger run --to bounds it

    config = load()
    args = argparse.Namespace(from_time="2026-11-02T00:00:00Z", to_time="2026-11-01T00:00:00Z", checkpoint_dir=None)
    with pytest.raises(DaggerConfigError, match="--from 2026-11-02T00:00:00Z must be before --to"):
        _replay_range(config, args)
    args = argparse.Namespace(from_time=str(_ms(T0)), to_time=None, checkpoint_dir=None)  # epoch ms works too
    start, end, checkpoint = _replay_range(config, args)
    assert (start, end) == (_ms(T0), None)
    assert checkpoint.endswith(f"{config.job_slug}-replay-20261101T000000Z-open")
