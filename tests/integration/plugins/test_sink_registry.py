"""The tests of tests/unit/plugins/test_sink_registry.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import START, job, kafka_stream, run_job
from tests.unit.plugins import test_sink_registry as unit_file

jsonl = unit_file.jsonl  # the unit file's fixture, which the test below asks for


def test_a_registered_sink_runs_in_a_job(jsonl, spark, broker, stencil, topic, tmp_path):
    from testing.produce import produce
    from testing.samples import bookings

    source = topic("reg-src")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(10, START)))
    out = tmp_path / "rows.jsonl"
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_ENDING_OFFSETS="latest")],
        "SELECT order_number FROM data_stream_0",
        SINK_TYPE="jsonl",
        SINK_JSONL_PATH=str(out),
        SINK_JSONL_EVERY="2",
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(line) for line in Path(out).read_text().splitlines()]
    assert len(rows) == 5 and {r["order_number"] for r in rows} <= {f"order-{i}" for i in range(10)}
    assert manager.counters.sinks["jsonl"]["written"].value == 5
