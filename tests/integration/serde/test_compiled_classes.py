"""The tests of tests/unit/serde/test_compiled_classes.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json

import pytest

from testing.produce import consume_all, produce
from tests.conftest import job, json_sink, kafka_stream, run_job
from tests.unit.serde import test_compiled_classes as unit_file

rides_module = unit_file.rides_module  # the unit file's fixture, which the test below asks for


@pytest.mark.integration
def test_a_job_over_compiled_classes_reads_timestamps_as_dagger_does(rides_module, spark, broker, topic, tmp_path):
    import datetime as dt

    source, out = topic("rides"), topic("rides-out")
    rides = []
    for i in range(6):
        ride = rides_module.Ride(ride_id=f"r{i}", fare=100 * i)
        ride.started_at.FromDatetime(dt.datetime(2026, 11, 25, 8, i, 30, 250_000 * (i % 4), tzinfo=dt.UTC))
        rides.append(ride)
    produce(broker.bootstrap, source, ((None, r.SerializeToString()) for r in rides))

    class NoStencil:
        def url(self, name: str) -> str:
            return ""

    stream = kafka_stream(
        broker,
        source,
        table="rides",
        proto="compiled.rides.Ride",
        ts=2,
        SOURCE_KAFKA_ENDING_OFFSETS="latest",
    )
    sql = "SELECT ride_id, started_at.seconds, started_at.nanos AS started_nanos, fare FROM rides WHERE fare > 0"
    data = job(NoStencil(), [stream], sql, **json_sink(broker, out))
    data.update(SCHEMA_REGISTRY_STENCIL_URLS="", SCHEMA_REGISTRY_STENCIL_ENABLE="false")
    data["SCHEMA_REGISTRY_PYTHON_MODULES"] = "rides_pb2"
    _, run = run_job(spark, data, tmp_path / "cp")
    assert run.exception() is None, run.exception()
    got = sorted((json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=5)), key=str)
    want = [
        {"ride_id": r.ride_id, "seconds": r.started_at.seconds, "started_nanos": r.started_at.nanos, "fare": r.fare}
        for r in rides
        if r.fare > 0
    ]
    assert got == sorted(want, key=str)
