"""Raystack Dagger's own quickstart jobs, as published, over its own message, on the real broker.

The job files in ``tests/dagger_quickstart/`` are Dagger's ``local.properties`` unchanged; only the endpoints
(broker, descriptor URL, topics, consumer group, ``latest`` → ``earliest`` so a bounded run sees the records
produced before it) and the sink (JSON to a topic, so the output can be read back) are replaced here. The
message, ``TestBookingLogMessage``, declares field 41 before 40 and has Struct and map fields. Every expected
row is computed here from the records produced, independently of the job.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import math
import uuid
from pathlib import Path

import pytest

from dagger.config.loader import read_config_file
from testing.produce import produce
from testing.samples import message_class
from tests.conftest import output_rows, run_job

pytestmark = pytest.mark.integration
QUICKSTART = Path(__file__).resolve().parents[2] / "dagger_quickstart"
Booking = message_class("org.raystack.dagger.consumer.TestBookingLogMessage")
START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
SERVICE_TYPES = ["FLIGHT", "BUS", "TRAIN"]
PLACES = [(19.075983, 72.877655), (19.237188, 72.844139), (59.237188, 23.844139)]


def bookings(count: int, step_seconds: float, offset_seconds: float = 0.0, prefix: str = "o") -> list:
    """Records like Dagger's kafkafeeder.sh sends, with the out-of-order, Struct and map fields set too."""
    out = []
    for i in range(count):
        m = Booking(
            service_type=SERVICE_TYPES[i % 3],
            order_number=f"{prefix}{i}",
            customer_id=f"customer-{i % 4}",
            total_customer_discount=0.25 * i,
            customer_price=10.0 + i,
        )
        when = START + dt.timedelta(seconds=offset_seconds + i * step_seconds)
        m.event_timestamp.FromDatetime(when)
        m.booking_creation_time.FromDatetime(when - dt.timedelta(minutes=1))
        pickup, dropoff = PLACES[i % 2], PLACES[1 + i % 2]
        m.driver_pickup_location.latitude, m.driver_pickup_location.longitude = pickup
        m.driver_dropoff_location.latitude, m.driver_dropoff_location.longitude = dropoff
        m.profile_data.update({"tier": ["gold", "silver"][i % 2], "score": i})
        m.metadata["city"] = "Mumbai"
        out.append(m)
    return out


def quickstart_job(name: str, broker, stencil, topics: dict[str, str], out: str) -> dict:
    """Dagger's job file ``name`` with the endpoints of this machine."""
    data = read_config_file(QUICKSTART / f"{name}.properties")
    group = f"g-{uuid.uuid4().hex[:8]}"
    streams = (
        data["STREAMS"]
        .replace("kafka:29094", broker.bootstrap)
        .replace('AUTO_OFFSET_RESET":"latest"', 'AUTO_OFFSET_RESET":"earliest"')
        .replace("dagger-test-topic-cgroup-v1", group)
    )
    for published, ours in topics.items():
        streams = streams.replace(f'"{published}"', f'"{ours}"')
    data.update(
        STREAMS=streams,
        SCHEMA_REGISTRY_STENCIL_URLS=stencil.url("examples.desc"),
        SINK_TYPE="kafka",
        SINK_KAFKA_BROKERS=broker.bootstrap,
        SINK_KAFKA_TOPIC=out,
        SINK_KAFKA_DATA_TYPE="JSON",
        FLINK_JOB_ID=f"{name}-{group}",
    )
    return data


def run(spark, data: dict, tmp_path, broker, out: str, expected: int) -> list[dict]:
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    return [json.loads(m.value()) for m in output_rows(broker, manager, out, expected)]


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def closed_windows(times: list[dt.datetime], size: dt.timedelta, delay: dt.timedelta) -> dict:
    """Window end → the records' indexes, for the windows the final watermark (max time - delay) has closed."""
    watermark = max(times) - delay
    windows = collections.defaultdict(list)
    for i, t in enumerate(times):
        start = START + size * ((t - START) // size)
        if start + size <= watermark:
            windows[start + size].append(i)
    return windows


def test_daggers_tumble_window_job(spark, broker, stencil, topic, tmp_path):
    source, out = topic("dagger-v1"), topic("tumble-out")
    records = bookings(80, 1.5)  # two minutes of bookings, 30-second windows
    produce(broker.bootstrap, source, ((None, m.SerializeToString()) for m in records))
    data = quickstart_job("tumble_window", broker, stencil, {"dagger-test-topic-v1": source}, out)
    times = [m.event_timestamp.ToDatetime(dt.UTC) for m in records]
    expected = closed_windows(times, dt.timedelta(seconds=30), dt.timedelta(milliseconds=1000))
    rows = run(spark, data, tmp_path, broker, out, expected=len(expected))
    assert sorted((at(r["window_timestamp"]), r["booking_count"]) for r in rows) == sorted(
        (end, len(members)) for end, members in expected.items()
    )


def haversine_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


def test_daggers_distance_udf_job(spark, broker, stencil, topic, tmp_path):
    source, out = topic("dagger-v1"), topic("distance-out")
    records = bookings(60, 3.0)  # three minutes, 60-second windows, two pickup/drop-off pairs
    produce(broker.bootstrap, source, ((None, m.SerializeToString()) for m in records))
    data = quickstart_job("distance_udf", broker, stencil, {"dagger-test-topic-v1": source}, out)
    times = [m.event_timestamp.ToDatetime(dt.UTC) for m in records]
    expected = sorted(
        (end, haversine_km(PLACES[i % 2], PLACES[1 + i % 2]))
        for end, members in closed_windows(times, dt.timedelta(seconds=60), dt.timedelta(seconds=1)).items()
        for i in {m % 2: m for m in members}.values()  # one row per pickup/drop-off group
    )
    rows = run(spark, data, tmp_path, broker, out, expected=len(expected))
    got = sorted((at(r["window_timestamp"]), r["distance_data"]) for r in rows)
    assert [end for end, _ in got] == [end for end, _ in expected]
    assert [d for _, d in got] == pytest.approx([d for _, d in expected], rel=1e-12)


def test_daggers_deduplication_transformer_job(spark, broker, stencil, topic, tmp_path):
    source, out = topic("dagger-v1"), topic("dedup-out")
    records = bookings(30, 1.0) + bookings(30, 1.0, offset_seconds=40)  # every order number twice
    produce(broker.bootstrap, source, ((None, m.SerializeToString()) for m in records))
    data = quickstart_job("deduplication_transformer", broker, stencil, {"dagger-test-topic-v1": source}, out)
    rows = run(spark, data, tmp_path, broker, out, expected=30)
    assert sorted((r["order_number"], r["customer_id"]) for r in rows) == sorted(
        {(m.order_number, m.customer_id) for m in records}
    )


def test_daggers_inner_join_job_without_an_equality_key(spark, broker, stencil, topic, tmp_path):
    """``JOIN data_stream_1 ON data_stream_1.rowtime BETWEEN data_stream_0.rowtime AND … + INTERVAL '5' MINUTE``."""
    left_topic, right_topic, out = topic("dagger-v1"), topic("dagger-v2"), topic("join-out")
    left = bookings(48, 15.0)  # 12 minutes of bookings on each stream, the right one 100 s later
    right = bookings(48, 15.0, offset_seconds=100, prefix="r")
    produce(broker.bootstrap, left_topic, ((None, m.SerializeToString()) for m in left))
    produce(broker.bootstrap, right_topic, ((None, m.SerializeToString()) for m in right))
    data = quickstart_job(
        "inner_join",
        broker,
        stencil,
        {"dagger-test-topic-v1": left_topic, "dagger-test-topic-v2": right_topic},
        out,
    )
    left_times = [m.event_timestamp.ToDatetime(dt.UTC) for m in left]
    right_times = [m.event_timestamp.ToDatetime(dt.UTC) for m in right]
    interval = dt.timedelta(minutes=5)
    # the join holds its output back by the interval (a left row may still meet right rows up to 5 minutes
    # later); 5-second windows of the left rows close when both inputs' watermark, less the interval, passes them
    watermark = min(max(left_times), max(right_times)) - dt.timedelta(seconds=1) - interval
    expected = collections.Counter()
    for i, lt in enumerate(left_times):
        end = START + dt.timedelta(seconds=5) * ((lt - START) // dt.timedelta(seconds=5) + 1)
        matches = sum(1 for rt in right_times if lt <= rt <= lt + interval)
        if matches and end <= watermark:
            expected[(end, SERVICE_TYPES[i % 3])] += matches
    rows = run(spark, data, tmp_path, broker, out, expected=len(expected))
    got = {(at(r["window_timestamp"]), r["tag_service_type"]): r["number_of_orders"] for r in rows}
    assert got == dict(expected)
    assert len(got) > 20
