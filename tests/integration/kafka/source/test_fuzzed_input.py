"""100,000 fuzzed records under each invalid-record policy: nothing crashes under drop and dead-letter, and every
record is accounted for — input = output + dropped + dead letters — from the topics and from the metrics; under
fail the message names topic, partition and offset (issue 26, item 4)."""

from __future__ import annotations

import random
import signal
import subprocess
import time

import pytest

from testing.broker import free_port
from testing.produce import produce, topic_size
from testing.samples import bookings, message_class
from tests.conftest import START, job, kafka_sink, kafka_stream, run_job, varint
from tests.unit.telemetry.test_telemetry import scrape, start_job, value

pytestmark = [pytest.mark.integration, pytest.mark.chaos]
Booking = message_class("dagger.examples.BookingLogMessage")
TOTAL = 100_000
ALL = [f.name for f in Booking.DESCRIPTOR.fields]


def fuzzed(total: int, seed: int = 26) -> list[bytes]:
    """Valid bookings mixed with random bytes, truncated messages, wrong wire types, oversized values and deeply
    nested unknown groups."""
    rng = random.Random(seed)
    valid = bookings(2000, START)
    out = []
    for i in range(total):
        base = valid[i % len(valid)]
        kind = rng.random()
        if kind < 0.55:
            out.append(base)
        elif kind < 0.70:
            out.append(rng.randbytes(rng.randrange(1, 120)))
        elif kind < 0.82:
            out.append(base[: rng.randrange(1, len(base))])
        elif kind < 0.92:  # field 1 (order_number, a string) with another wire type
            wire = rng.choice([1, 3, 5, 6, 7])
            out.append(bytes([(1 << 3) | wire]) + base[1:])
        elif kind < 0.97:  # unknown groups nested deeper than any parser's recursion limit
            depth = rng.choice([10, 150, 2000])
            out.append(
                base + bytes([(99 << 3 | 3) & 0x7F | 0x80, 6]) * depth + bytes([(99 << 3 | 4) & 0x7F | 0x80, 6]) * depth
            )
        else:  # an oversized order number (64 KiB)
            big = b"x" * 65536
            out.append(b"\x0a" + varint(len(big)) + big + base)
    return out


def _reference_valid(values: list[bytes], fields: list[str]) -> int:
    """How many python-protobuf (the reference decoder) parses as the message the job decodes: the stream's
    message pruned to the ``fields`` the query reads (dagger.schema.projection). Other fields are unknown to it
    and skipped by their wire type, as the job's decoder skips them, so a record malformed only in fields the
    query does not read is read (docs/sources.md)."""
    from google.protobuf import descriptor_pb2, message_factory

    from dagger.schema.descriptor_sets import build_pool
    from dagger.schema.projection import prune_message
    from testing.samples import example_descriptors

    fds = descriptor_pb2.FileDescriptorSet.FromString(example_descriptors().serialized)
    pruned = prune_message(fds, "dagger.examples.BookingLogMessage", fields)
    message = message_factory.GetMessageClass(build_pool(pruned).FindMessageTypeByName(Booking.DESCRIPTOR.full_name))
    ok = 0
    for v in values:
        try:
            message.FromString(v)
            ok += 1
        except Exception:  # noqa: BLE001 - DecodeError, RecursionError …
            pass
    return ok


@pytest.fixture(scope="module")
def fuzzed_topic(broker):
    name = "fuzzed-input"
    broker.create_topic(name, 2)
    values = fuzzed(TOTAL)
    produce(broker.bootstrap, name, ((None, v) for v in values), partitions=2)
    return name, _reference_valid(values, ["order_number", "event_timestamp"]), _reference_valid(values, ALL)


def _run(
    spark, broker, stencil, topic, tmp_path, source, policy, sql="SELECT order_number FROM data_stream_0", **stream
):
    out = topic(f"fuzz-{policy}-out")
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY=policy, **stream)],
        sql,
        **(
            kafka_sink(broker, out, "", SINK_KAFKA_DATA_TYPE="JSON")  # every column, unknown enum numbers too
            if sql.startswith("SELECT *")
            else kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage")
        ),
    )
    manager, query = run_job(spark, data, tmp_path / f"cp-{policy}-{len(sql)}")
    return manager, query, out


def _run_scraped(broker, stencil, topic, tmp_path, source, policy, done, **stream) -> tuple[dict, str]:
    """``dagger run`` of the drop/dead-letter job in a process of its own, its metrics read from its Prometheus
    endpoint until ``done(metrics, output topic)``; then stopped. Returns the last scrape and the output topic."""
    out = topic(f"fuzz-{policy}-out")
    port = free_port()
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY=policy, **stream)],
        "SELECT order_number FROM data_stream_0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
        METRIC_PROMETHEUS_PORT=str(port),
    )
    work = tmp_path / policy
    work.mkdir()
    process = start_job(data, work)
    found = None
    try:
        deadline = time.monotonic() + 300
        while not (found and done(found, out)):
            assert time.monotonic() < deadline, f"{policy}: the job's metrics never added up: {found}"
            assert process.poll() is None, process.communicate()[1][-3000:]
            time.sleep(0.5)
            found = scrape(port)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
    return found, out


def test_drop_and_dead_letter_account_for_every_fuzzed_record(broker, stencil, topic, tmp_path, fuzzed_topic):
    """Counted from the job's own Prometheus endpoint (``dagger run``), not from metrics rebuilt in the test."""
    source, reference_valid, _ = fuzzed_topic

    def drained(found: dict, out: str) -> bool:  # every record read, and the sink's count caught up
        read = value(found, "dagger_source_records_total", table="data_stream_0")
        written = value(found, "dagger_sink_records_total", sink="kafka", outcome="written")
        return read == TOTAL and written == topic_size(broker.bootstrap, out) and written > 0

    found, out = _run_scraped(broker, stencil, topic, tmp_path, source, "drop", drained)
    dropped = value(found, "dagger_invalid_records_total", table="data_stream_0", policy="drop")
    written = topic_size(broker.bootstrap, out)
    assert written + dropped == TOTAL  # from the output topic and the job's endpoint
    assert value(found, "dagger_sink_records_total", sink="kafka", outcome="written") == written
    assert written == reference_valid  # the fast decoder accepts exactly what python-protobuf accepts

    dlq = topic("fuzz-dead")

    def dead_lettered(found: dict, out: str) -> bool:
        return drained(found, out) and value(
            found, "dagger_dead_letter_records_total", origin="stream:data_stream_0"
        ) == topic_size(broker.bootstrap, dlq)

    found, out = _run_scraped(
        broker, stencil, topic, tmp_path, source, "dead-letter", dead_lettered, SOURCE_KAFKA_DEAD_LETTER_TOPIC=dlq
    )
    dead = topic_size(broker.bootstrap, dlq)
    assert topic_size(broker.bootstrap, out) + dead == TOTAL
    assert dead == dropped  # the same records, kept this time
    assert value(found, "dagger_dead_letter_records_total", origin="stream:data_stream_0") == dead


def test_fail_names_the_first_undecodable_record(spark, broker, stencil, topic, tmp_path, fuzzed_topic):
    source, _, _ = fuzzed_topic
    _, query, _ = _run(spark, broker, stencil, topic, tmp_path, source, "fail")
    error = str(query.exception())
    assert f"record at topic {source} partition " in error and " offset " in error and "cannot be decoded" in error


def test_a_query_that_reads_every_field_accepts_exactly_what_the_reference_decoder_accepts(
    spark, broker, stencil, topic, tmp_path, fuzzed_topic
):
    source, _, reference_all = fuzzed_topic
    sql = "SELECT * FROM data_stream_0"  # every field decoded: nothing pruned
    manager, query, out = _run(spark, broker, stencil, topic, tmp_path, source, "drop", sql=sql)
    assert query.exception() is None, str(query.exception())[:3000]
    assert manager.counters.sinks["kafka"]["written"].value == topic_size(broker.bootstrap, out) == reference_all
