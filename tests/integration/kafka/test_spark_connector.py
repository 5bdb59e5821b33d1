"""How a protobuf job reads and writes Kafka in micro-batches: ptars in Python workers (``SPARK_PROTOBUF_CODEC=ptars``,
the codec before issue 53), Dagger's reader and writer handing the records to Dagger's codec in the JVM, Dagger's
reader in the JVM (``SPARK_KAFKA_CONNECTOR=jvm``: the Java client reads, the records are decoded as they are read)
and Spark's own Kafka source (``spark``), both of these with Spark's Kafka sink and no Python worker on the records'
way. Each writes the same records, drops and counts the same undecodable ones and commits its consumer group; a
checkpoint keeps its form of offsets across restarts (Dagger's reader's, in Python or the JVM, or Spark's); ``auto``
keeps Dagger's reader and writer for the jobs that need them, saying why."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from testing.produce import produce, topic_size
from testing.samples import bookings, message_class
from tests.conftest import START, dagger, dropped, job, kafka_sink, kafka_stream, run_job, validate_here

pytestmark = pytest.mark.integration
Summary = message_class("dagger.examples.BookingSummaryMessage")
Booking = message_class("dagger.examples.BookingLogMessage")
SQL = (
    "SELECT order_number, service_type, driver_pickup_location AS pickup, event_timestamp, amount_paid_by_cash "
    "FROM data_stream_0 WHERE amount_paid_by_cash < 500"
)
WINDOW_SQL = (
    "SELECT service_area_id, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS "
    "window_timestamp FROM data_stream_0 GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        reader.close()
    return [tp.offset for tp in found]


def _summary(booking) -> bytes:  # noqa: ANN001 - what the SQL makes of a booking, serialized as the sinks do
    out = Summary(order_number=booking.order_number, service_type=booking.service_type)
    out.amount_paid_by_cash = booking.amount_paid_by_cash
    out.pickup.MergeFromString(booking.driver_pickup_location.SerializeToString())
    out.event_timestamp.MergeFromString(booking.event_timestamp.SerializeToString())
    return out.SerializeToString(deterministic=True)


def _ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "sc-ends"})
    try:
        return [reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        reader.close()


def _written(bootstrap: str, out: str) -> list[bytes]:
    from testing.produce import consume_all

    return sorted(
        Summary.FromString(m.value()).SerializeToString(deterministic=True)
        for m in consume_all(bootstrap, out, expected=topic_size(bootstrap, out))
    )


#: (SPARK_PROTOBUF_CODEC, SPARK_KAFKA_CONNECTOR): before issue 53, Dagger's reader with the JVM codec, Dagger's
#: reader in the JVM, Spark's
RUNS = (("ptars", "dagger"), ("jvm", "dagger"), ("jvm", "jvm"), ("jvm", "spark"))


def test_each_path_writes_the_same_records_drops_and_counts_the_same_and_commits_the_group(
    spark, broker, stencil, topic, tmp_path
):
    source = topic("sc-in", 2)
    values = bookings(120, START)
    broken = [b"\xff\xff\xff not a booking", b"\x0a\x05ab"]  # a bad tag; a string longer than what is left
    produce(broker.bootstrap, source, ((None, v) for v in values[:60] + broken + values[60:]), partitions=2)
    written, plans = {}, {}
    for codec, connector in RUNS:
        out = topic(f"sc-out-{codec}-{connector}")
        stream = kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")
        data = job(
            stencil,
            [stream],
            SQL,
            SPARK_PROTOBUF_CODEC=codec,
            SPARK_KAFKA_CONNECTOR=connector,
            **kafka_sink(broker, out, Summary.DESCRIPTOR.full_name),
        )
        manager, query = run_job(spark, data, tmp_path / f"cp-{codec}-{connector}")
        assert query.exception() is None, query.exception()
        assert dropped(query) == 2
        assert manager.context.spark_kafka == (connector != "dagger")
        assert manager.context.kafka_reader == connector
        plans[codec, connector] = plan = query._jsq.explainInternal(True)
        written[codec, connector] = _written(broker.bootstrap, out)
        if connector != "dagger":  # Spark's sink counted what the topic holds
            assert sum(p["sink"].get("numOutputRows", 0) for p in query.recentProgress) == 50
        else:
            assert manager.counters.sinks["kafka"]["written"].value == 50
        group = stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"]
        ends = _ends(broker.bootstrap, source, 2)
        assert _committed(broker.bootstrap, group, source, 2) == ends  # every record, the two broken ones too
        # the JVM's codec is in the plan; Dagger's reader in the JVM decodes as it reads, outside the plan's expressions
        decoded = "dagger_protobuf(" in plan or "DaggerKafka[" in plan
        assert (decoded and "dagger_to_protobuf(" in plan) == (codec == "jvm"), plan[-3000:]
    assert len(written["jvm", "spark"]) == 50  # cash i * 10 < 500
    assert written["jvm", "spark"] == written["jvm", "jvm"] == written["jvm", "dagger"] == written["ptars", "dagger"]
    expected = sorted(_summary(b) for b in map(Booking.FromString, values) if b.amount_paid_by_cash < 500)
    assert written["jvm", "spark"] == expected
    python = ("PythonDataSource", "BatchEvalPython", "ArrowEvalPython", "MapInArrow")
    spark_plan = plans["jvm", "spark"]  # Spark's Kafka source, no Python node on the records' way
    assert "KafkaV2" in spark_plan or "kafka" in spark_plan.lower()
    assert not any(n in spark_plan for n in python)
    jvm_plan = plans["jvm", "jvm"]  # Dagger's reader in the JVM, no Python node either
    assert "DaggerKafka[data_stream_0]" in jvm_plan and not any(n in jvm_plan for n in python)


def test_a_restart_keeps_the_form_of_offsets_its_checkpoint_was_made_with(spark, broker, stencil, topic, tmp_path):
    """Dagger's reader in Python workers and in the JVM keep the same offsets: a checkpoint of one resumes with
    the other, each record written once; ``auto`` keeps a checkpoint's own connector; Spark's source keeps offsets
    of its own form, and is refused a checkpoint of Dagger's reader (and Dagger's reader one of Spark's)."""
    source, out = topic("sc-keep"), topic("sc-keep-out")
    values = bookings(40, START)  # cash i * 10 < 500: every one is written
    produce(broker.bootstrap, source, ((None, v) for v in values[:10]))
    data = job(stencil, [kafka_stream(broker, source)], SQL, SPARK_KAFKA_CONNECTOR="dagger",
               **kafka_sink(broker, out, Summary.DESCRIPTOR.full_name))  # fmt: skip
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None and not manager.context.spark_kafka
    produce(broker.bootstrap, source, ((None, v) for v in values[10:20]))
    data["SPARK_KAFKA_CONNECTOR"] = "auto"  # the job qualifies, but its checkpoint holds Dagger's reader's offsets
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert not manager.context.spark_kafka
    assert manager.context.connector_note == "Dagger's Kafka reader and writer: the checkpoint was made with them"
    assert topic_size(broker.bootstrap, out) == 20  # each record once, across the two runs
    produce(broker.bootstrap, source, ((None, v) for v in values[20:30]))
    data["SPARK_KAFKA_CONNECTOR"] = "jvm"  # the same offsets: the JVM reader resumes where the Python one stopped
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert manager.context.kafka_reader == "jvm"
    produce(broker.bootstrap, source, ((None, v) for v in values[30:]))
    data["SPARK_KAFKA_CONNECTOR"] = "dagger"  # and back
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert _written(broker.bootstrap, out) == sorted(_summary(Booking.FromString(v)) for v in values)
    data["SPARK_KAFKA_CONNECTOR"] = "spark"
    with pytest.raises(Exception, match="the checkpoint was made with Dagger's Kafka reader"):
        run_job(spark, data, tmp_path / "cp")


@pytest.mark.parametrize("connector", ["spark", "jvm"])
def test_a_running_job_logs_each_batch_beside_the_next_and_an_available_now_run_resumes_from_its_checkpoint(
    spark, broker, stencil, topic, tmp_path, connector
):
    """Spark's asynchronous progress tracking (a stateless query on a processing-time trigger): each micro-batch's
    offsets are logged while the next one runs, every batch still logged, so an ``--available-now`` run (which
    Spark refuses the option) resumes from the checkpoint, each record written once. The group's offsets follow
    the batches while the job runs."""
    import time

    from dagger.job import Job, load_config

    source, out = topic("sc-async", 2), topic("sc-async-out")
    values = bookings(50, START)  # cash i * 10 < 500: every one is written
    stream = kafka_stream(broker, source)
    data = job(stencil, [stream], SQL, SPARK_KAFKA_CONNECTOR=connector,
               **kafka_sink(broker, out, Summary.DESCRIPTOR.full_name))  # fmt: skip
    group = stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"]
    manager = Job(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), available_now=False, spark=spark)
    query = manager.start()
    try:
        execution = query._jsq.streamingQuery().getClass().getSimpleName()
        assert execution == "AsyncProgressTrackingMicroBatchExecution"
        for round_ in range(4):  # four rounds of ten records while it runs: a micro-batch (or more) each
            produce(broker.bootstrap, source, ((None, v) for v in values[round_ * 10 : round_ * 10 + 10]), partitions=2)
            deadline = time.monotonic() + 60
            while topic_size(broker.bootstrap, out) < round_ * 10 + 10 and time.monotonic() < deadline:
                assert query.exception() is None, query.exception()
                time.sleep(0.2)
            assert topic_size(broker.bootstrap, out) == round_ * 10 + 10
            if round_ == 1:  # the group follows the batches while the job runs (the runner or the reader commits)
                manager.after_batches(query)  # what the runner calls between its waits
                while sum(_committed(broker.bootstrap, group, source, 2)) < 20 and time.monotonic() < deadline:
                    time.sleep(0.2)
                    manager.after_batches(query)
                assert sum(_committed(broker.bootstrap, group, source, 2)) >= 20
        batches = query.lastProgress["batchId"]
    finally:
        query.stop()
    manager.finish(query)
    assert batches >= 3
    assert _committed(broker.bootstrap, group, source, 2) == _ends(broker.bootstrap, source, 2)
    produce(broker.bootstrap, source, ((None, v) for v in values[40:]), partitions=2)
    manager, query = run_job(spark, data, tmp_path / "cp")  # available-now: Spark's synchronous logs
    assert query.exception() is None, query.exception()
    assert query._jsq.streamingQuery().getClass().getSimpleName() == "MicroBatchExecution"
    assert _written(broker.bootstrap, out) == sorted(_summary(Booking.FromString(v)) for v in values)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"DEAD_LETTER_PATH": "/tmp/dl"}, "the job has a dead-letter output"),
        ({"SINK_KAFKA_DATA_TYPE": "JSON"}, "SINK_KAFKA_DATA_TYPE=JSON (auto takes protobuf sinks only)"),
        ({"FLINK_SQL_QUERY": "SELECT order_number, shout(customer_id) AS customer_id FROM data_stream_0"},
         "the query runs Python"),
    ],
)  # fmt: skip
def test_auto_keeps_daggers_reader_and_writer_for_jobs_that_need_them_naming_why(
    spark, broker, stencil, topic, tmp_path, change, why
):
    source, out = topic("sc-auto"), topic("sc-auto-out")
    sink = kafka_sink(broker, out, Summary.DESCRIPTOR.full_name)
    data = job(stencil, [kafka_stream(broker, source)], SQL, SPARK_KAFKA_CONNECTOR="auto", **sink)
    if "shout" in change.get("FLINK_SQL_QUERY", ""):
        (tmp_path / "shout.py").write_text(
            "import udfs\n\n@udfs.udf(returns='string')\ndef shout(text: str) -> str:\n    return text.upper()\n"
        )
        data.update(
            PYTHON_UDF_ENABLE="true", PYTHON_UDF_CONFIG=json.dumps({"PYTHON_FILES": str(tmp_path / "shout.py")})
        )
    if change.get("SINK_KAFKA_DATA_TYPE") == "JSON":
        del data["SINK_KAFKA_PROTO_MESSAGE"]
    data.update(change)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    # a job's Python files are added to its session (SparkContext.addFile): that job validates in a process of its own
    validate = dagger if "PYTHON_UDF_CONFIG" in data else lambda *args: validate_here(spark, *args)
    validated = validate("validate", str(path), "--full") if validate is dagger else validate(str(path), "--full")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    line = next(x for x in validated.stdout.splitlines() if x.startswith("Kafka connector: "))
    assert line.startswith("Kafka connector: Dagger's Kafka reader and writer (") and why in line, line
    data.update(SPARK_KAFKA_CONNECTOR="spark")
    path.write_text(json.dumps(data))
    asked = validate("validate", str(path), "--full") if validate is dagger else validate(str(path), "--full")
    if "auto takes protobuf" in why:  # asked for, JSON is taken: to_json into Spark's sink
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "Kafka connector: Spark's Kafka source and sink" in asked.stdout
        return
    assert asked.returncode == 2, asked.stdout + asked.stderr
    assert f"SPARK_KAFKA_CONNECTOR=spark: {why}" in asked.stdout + asked.stderr


def test_validate_says_a_qualifying_job_takes_sparks_connector(spark, broker, stencil, topic, tmp_path):
    source, out = topic("sc-ok"), topic("sc-ok-out")
    sink = kafka_sink(broker, out, Summary.DESCRIPTOR.full_name)
    data = job(stencil, [kafka_stream(broker, source)], SQL, SPARK_KAFKA_CONNECTOR="spark", **sink)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    validated = validate_here(spark, str(path), "--full")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert (
        "Kafka connector: Spark's Kafka source and sink, the records decoded and encoded in the JVM" in validated.stdout
    )


def test_a_query_that_keeps_state_is_told_from_one_that_does_not(spark):
    """Spark's asynchronous progress tracking takes stateless queries only: the plan says which a query is."""
    from pyspark.sql import functions as F

    from dagger.kafka.spark_connector import stateful

    rates = spark.readStream.format("rate").load()
    assert not stateful(rates.where(F.col("value") % 2 == 0).select((F.col("value") * 2).alias("twice")))
    assert stateful(rates.groupBy("value").count())
    assert stateful(rates.dropDuplicates(["value"]))
    assert stateful(rates.alias("a").join(rates.alias("b"), "value"))
    windowed = rates.withWatermark("timestamp", "10 seconds").groupBy(F.window("timestamp", "1 minute")).count()
    assert stateful(windowed)
