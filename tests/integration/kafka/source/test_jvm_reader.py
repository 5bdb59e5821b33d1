"""Dagger's Kafka reader in the JVM (``SPARK_KAFKA_CONNECTOR=jvm``): the Python reader's planning on the driver, the
records read by the Java client and decoded as they are read (``dagger/jvm/KafkaRanges*.java``), Spark's Kafka sink.
Against Apache Kafka: a window job aligned in event time writes what Dagger's reader writes; an undecodable record
stops the job naming where it is; Confluent-framed records are read behind their header; a live job's consumers,
kept between micro-batches, lose and repeat nothing while partitions are read in tasks of several."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from google.protobuf import message_factory

from testing.produce import consume_all, produce, topic_size
from testing.samples import bookings, example_descriptors
from tests.conftest import START, dagger, dropped, job, kafka_sink, kafka_stream, run_job, validate_here
from tests.unit.kafka.source.test_event_time import COUNT_SQL, _expected_minutes, _skewed, _window_counts

pytestmark = pytest.mark.integration
SQL = (
    "SELECT order_number, service_type, driver_pickup_location AS pickup, event_timestamp, amount_paid_by_cash "
    "FROM data_stream_0 WHERE amount_paid_by_cash < 500"
)
SUMMARY = "dagger.examples.BookingSummaryMessage"
DESCRIPTORS = example_descriptors()
Summary = message_factory.GetMessageClass(DESCRIPTORS.find_message(SUMMARY))
Booking = message_factory.GetMessageClass(DESCRIPTORS.find_message("dagger.examples.BookingLogMessage"))


def _summaries(bootstrap: str, out: str) -> list[bytes]:
    return sorted(
        Summary.FromString(m.value()).SerializeToString(deterministic=True)
        for m in consume_all(bootstrap, out, expected=topic_size(bootstrap, out))
    )


def _expected(values: list[bytes], below: int = 500) -> list[bytes]:
    out = []
    for booking in map(Booking.FromString, values):
        if booking.amount_paid_by_cash < below:
            s = Summary(order_number=booking.order_number, service_type=booking.service_type)
            s.amount_paid_by_cash = booking.amount_paid_by_cash
            s.pickup.MergeFromString(booking.driver_pickup_location.SerializeToString())
            s.event_timestamp.MergeFromString(booking.event_timestamp.SerializeToString())
            out.append(s.SerializeToString(deterministic=True))
    return sorted(out)


def test_a_backlog_over_partitions_an_hour_apart_drops_nothing_aligned_in_event_time(
    spark, broker, stencil, topic, tmp_path
):
    """Event time, the watermark and windows on the JVM reader: a partition an hour ahead of the other is held back
    by the planner (Dagger's alignment), so no record of the slower one comes late; without alignment the same
    backlog loses hundreds of records (the case is real). ``auto`` takes the JVM reader for the window job."""
    source, times = _skewed(broker, topic)
    expected = _expected_minutes(times, dt.timedelta(seconds=10))
    sql = COUNT_SQL.format(where="true")
    unaligned, late = _window_counts(
        broker, stencil, spark, tmp_path, source, sql, len(expected) - 15, SPARK_MAX_RECORDS_PER_TRIGGER=300,
        SPARK_KAFKA_CONNECTOR="jvm", FLINK_WATERMARK_PER_PARTITION_ENABLE="false",
    )  # fmt: skip
    assert late > 0 and sum(n for _, n in expected) - sum(n for _, n in unaligned) > 600
    aligned, late = _window_counts(
        broker, stencil, spark, tmp_path, source, sql, len(expected), SPARK_MAX_RECORDS_PER_TRIGGER=300,
        SPARK_KAFKA_CONNECTOR="auto",
    )  # fmt: skip
    assert late == 0
    assert aligned == expected


def test_an_undecodable_record_stops_the_job_naming_where_it_is(broker, stencil, topic, tmp_path):
    source, out = topic("jr-bad"), topic("jr-bad-out")
    produce(broker.bootstrap, source, ((None, v) for v in [*bookings(3, START), b"\xff\xff not a booking"]))
    data = job(stencil, [kafka_stream(broker, source)], SQL, SPARK_KAFKA_CONNECTOR="jvm",
               **kafka_sink(broker, out, SUMMARY))  # fmt: skip
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    ran = dagger("run", str(path), "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), timeout=240)
    assert ran.returncode == 1, ran.stderr[-3000:]
    last = ran.stderr.strip().splitlines()[-1]
    assert f"stream 'data_stream_0': record at topic {source} partition 0 offset 3 cannot be decoded" in last, last
    assert "not a valid dagger.examples.BookingLogMessage" in last
    assert "SOURCE_KAFKA_INVALID_RECORD_POLICY" in last
    assert "Traceback" not in ran.stderr


def test_a_row_the_sink_cannot_write_stops_the_job_in_the_sinks_words(broker, stencil, topic, tmp_path):
    """Spark's Kafka sink with Dagger's encoder (one expression, which fails the query itself): an enum name the
    enum lacks ends ``dagger run`` naming the sink, the message, the column and what to set."""
    source, out = topic("jr-refused"), topic("jr-refused-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(3, START)))
    sql = "SELECT order_number, 'NO_SUCH_SERVICE' AS service_type FROM data_stream_0"
    data = job(stencil, [kafka_stream(broker, source)], sql, **kafka_sink(broker, out, SUMMARY))
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    ran = dagger("run", str(path), "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), timeout=240)
    assert ran.returncode == 1, ran.stderr[-3000:]
    assert "by Dagger's Kafka reader in the JVM" in ran.stderr and "by Spark's Kafka sink" in ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert (
        f"SinkError: sink 'kafka': a row cannot be written as {SUMMARY} (value): column 'service_type' holds " in last
    ), last
    assert "'NO_SUCH_SERVICE', which is not a value of enum" in last
    assert "Set DEAD_LETTER_KAFKA_TOPIC (+ _BROKERS) or DEAD_LETTER_PATH to keep the job running" in last
    assert "Traceback" not in ran.stderr
    assert topic_size(broker.bootstrap, out) == 0


def test_undecodable_records_are_counted_and_dropped_and_tombstones_too(spark, broker, stencil, topic, tmp_path):
    source, out = topic("jr-drop"), topic("jr-drop-out")
    values = bookings(30, START)
    produce(broker.bootstrap, source, ((None, v) for v in [*values[:10], b"\x0a\x05ab", None, *values[10:]]))
    stream = kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")
    data = job(stencil, [stream], SQL, SPARK_KAFKA_CONNECTOR="jvm", **kafka_sink(broker, out, SUMMARY))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert manager.context.kafka_reader == "jvm"
    assert dropped(query) == 2
    assert _summaries(broker.bootstrap, out) == _expected(values)


def test_confluent_framed_protobuf_is_read_behind_its_header(spark, broker, stencil, topic, tmp_path, schema_registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    source, out = topic("jr-cf", 2), topic("jr-cf-out")
    client = SchemaRegistryClient({"url": schema_registry.url})
    serializer = ProtobufSerializer(Booking, client, {"use.deprecated.format": False})
    values = bookings(100, START)
    framed = [serializer(Booking.FromString(v), SerializationContext(source, MessageField.VALUE)) for v in values]
    produce(broker.bootstrap, source, ((None, v) for v in framed), partitions=2)
    stream = kafka_stream(broker, source, INPUT_SCHEMA_WIRE_FORMAT="confluent")
    data = job(stencil, [stream], SQL, SPARK_KAFKA_CONNECTOR="jvm", SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
               **kafka_sink(broker, out, SUMMARY))  # fmt: skip
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert manager.context.kafka_reader == "jvm"
    assert _summaries(broker.bootstrap, out) == _expected(values)


def test_a_live_job_reads_every_record_once_as_its_kept_consumers_fetch_ahead(spark, broker, stencil, topic, tmp_path):
    """Many small micro-batches on 6 partitions read in tasks of several (SPARK_KAFKA_RECORDS_PER_TASK): each task's
    consumer is kept for the next micro-batch, with what it fetched past its range; every record is written once."""
    from dagger.job import Job, load_config

    source, out = topic("jr-live", 6), topic("jr-live-out")
    values = bookings(600, START)
    stream = kafka_stream(broker, source)
    every = SQL.replace("< 500", "< 1000000")  # each record is written
    data = job(stencil, [stream], every, SPARK_KAFKA_CONNECTOR="jvm", SPARK_KAFKA_RECORDS_PER_TASK="40",
               SPARK_MAX_RECORDS_PER_TRIGGER="70", **kafka_sink(broker, out, SUMMARY))  # fmt: skip
    manager = Job(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), available_now=False, spark=spark)
    made = spark._jvm.dagger.kafka.KafkaRangesSource.consumersMade
    before = made()
    query = manager.start()
    expected = _expected(values, below=1000000)
    assert len(expected) == 600
    try:
        for i in range(0, 600, 100):  # fed while it runs, more than a micro-batch admits each time
            produce(broker.bootstrap, source, ((None, v) for v in values[i : i + 100]), partitions=6)
            time.sleep(0.3)
        deadline = time.monotonic() + 120
        while topic_size(broker.bootstrap, out) < len(expected) and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.3)
        batches = query.lastProgress["batchId"]
        read = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    manager.finish(query)
    assert batches >= 8 and sum(read) == 600  # 600 records at most 70 a micro-batch
    # the tasks of each micro-batch (dagger.kafka.source.partitions.tasks: as few as give each about 40 records);
    # a consumer per task would make one each, kept consumers one per set of partitions a task reads. Which sets
    # the tasks get follows each batch's records per partition, so under load most batches can bring a new one:
    # fewer than a batch each is not guaranteed, fewer than a task each is
    tasks = sum(min(6, -(-rows // 40)) for rows in read)
    assert made() - before < tasks, (made() - before, tasks, read)
    assert _summaries(broker.bootstrap, out) == expected


def test_validate_names_the_jvm_reader_and_why_a_job_cannot_have_it(spark, broker, stencil, topic, tmp_path):
    source, out = topic("jr-val"), topic("jr-val-out")
    data = job(stencil, [kafka_stream(broker, source)], SQL, SPARK_KAFKA_CONNECTOR="auto",
               **kafka_sink(broker, out, SUMMARY))  # fmt: skip
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    validated = validate_here(spark, str(path), "--full")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "Kafka connector: Dagger's Kafka reader in the JVM" in validated.stdout
    data["STREAMS"] = json.dumps([kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="dead-letter",
                                               SOURCE_KAFKA_DEAD_LETTER_TOPIC="jr-dl")])  # fmt: skip
    data["SPARK_KAFKA_CONNECTOR"] = "jvm"
    path.write_text(json.dumps(data))
    refused = validate_here(spark, str(path), "--full")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        "SPARK_KAFKA_CONNECTOR=jvm: STREAMS[data_stream_0]: SOURCE_KAFKA_INVALID_RECORD_POLICY=dead-letter"
        in refused.stdout + refused.stderr
    )
