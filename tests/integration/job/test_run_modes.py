"""`dagger run` in every bounded mode, with and without `--available-now` (a natural flag to type for a backfill).

The CLI runs in this process, on the session's Spark (``get_session`` returns the active session), so each run
costs no JVM start. Live Kafka runs: with ``--available-now`` in test_cli_jobs.py (the example configs) and
everywhere ``run_job`` is used; without it in test_cli_jobs.py's restart test.
"""

from __future__ import annotations

import json
import logging
import signal
import uuid

import pytest

from testing.parquet_samples import partition_path, write_standard
from testing.produce import consume_all, produce_at, topic_size
from testing.samples import bookings, message_class
from tests.conftest import START, job, kafka_sink, kafka_stream

pytestmark = pytest.mark.integration
Booking = message_class("dagger.examples.BookingLogMessage")
Summary = message_class("dagger.examples.BookingSummaryMessage")
SQL = "SELECT order_number, customer_id FROM data_stream_0"


@pytest.fixture
def cli(spark):
    """``dagger.cli.main`` with the signal handlers and root logging it installs put back afterwards."""
    from dagger.cli import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield main
    for s, h in handlers.items():
        signal.signal(s, h)
    root.handlers[:], root.level = saved[0], saved[1]


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("history")
    write_standard(partition_path(root, START) / "part-0.parquet", [Booking.FromString(b) for b in bookings(40, START)])
    (partition_path(root, START) / "_SUCCESS").write_text("")
    return root


@pytest.fixture(scope="module")
def kafka_topic(broker):
    """Booking i has event time and Kafka timestamp START + i minutes."""
    name = f"modes-{uuid.uuid4().hex[:6]}"
    broker.create_topic(name, 2)
    values = bookings(40, START, step_seconds=60)
    stamps = [int(START.timestamp() * 1000) + i * 60_000 for i in range(40)]
    produce_at(broker.bootstrap, name, list(zip(stamps, values, strict=True)), 2)
    return name


def _config(mode: str, broker, stencil, parquet_dir, kafka_topic, out: str) -> dict:
    if mode == "parquet":
        stream = {
            "INPUT_SCHEMA_TABLE": "data_stream_0",
            "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
            "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
            "SOURCE_DETAILS": [{"SOURCE_NAME": "PARQUET_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
            "SOURCE_PARQUET_FILE_PATHS": [str(parquet_dir)],
        }
    elif mode == "kafka_ending_offsets":
        stream = kafka_stream(broker, kafka_topic, SOURCE_KAFKA_ENDING_OFFSETS="latest")
    else:  # kafka_replay: the live job's config, bounded by --from/--to
        stream = kafka_stream(broker, kafka_topic)
    return job(stencil, [stream], SQL, **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"))


@pytest.mark.parametrize("available_now", [False, True], ids=["plain", "available-now"])
@pytest.mark.parametrize("mode", ["parquet", "kafka_replay", "kafka_ending_offsets"])
def test_bounded_runs_with_and_without_available_now(
    cli, broker, stencil, parquet_dir, kafka_topic, tmp_path, capsys, mode, available_now
):
    out = f"modes-out-{uuid.uuid4().hex[:6]}"
    broker.create_topic(out, 1)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(_config(mode, broker, stencil, parquet_dir, kafka_topic, out)))
    argv = ["run", str(path), "--checkpoint-dir", str(tmp_path / "cp")]
    expected = [f"order-{i}" for i in range(40)]
    if mode == "kafka_replay":  # minutes 10 to 29 of the 40
        argv += ["--from", START.replace(minute=10).isoformat(), "--to", START.replace(minute=30).isoformat()]
        expected = expected[10:30]
    if available_now:
        argv.append("--available-now")
    assert cli(argv) == 0
    log = capsys.readouterr().err  # the CLI logs to stderr, as users see it
    got = sorted(Summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, len(expected)))
    assert got == sorted(expected)
    assert topic_size(broker.bootstrap, out) == len(expected)  # nothing more than was read
    assert f"sinks: kafka written={len(expected)}\n" in log  # the sink's own count
    assert "bounded run done" in log and f"{len(expected)} rows read" in log
    assert ("the input is bounded: --available-now changes nothing" in log) == available_now


def test_a_replay_of_a_range_without_records_writes_nothing_and_succeeds(cli, broker, stencil, kafka_topic, tmp_path):
    out = f"modes-out-{uuid.uuid4().hex[:6]}"
    broker.create_topic(out, 1)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(_config("kafka_replay", broker, stencil, None, kafka_topic, out)))
    before = START.replace(year=2025)  # a year before the first record
    argv = ["run", str(path), "--from", before.isoformat(), "--to", before.replace(hour=11).isoformat()]
    assert cli([*argv, "--checkpoint-dir", str(tmp_path / "cp")]) == 0
    assert topic_size(broker.bootstrap, out) == 0
