"""End-to-end jobs on Apache Kafka and a real Spark session (no mocks of either)."""

from __future__ import annotations

import collections
import datetime as dt
import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from testing.produce import consume_all, produce
from testing.samples import AREAS, bookings, customers, message_class
from tests.conftest import START, dropped, job, kafka_sink, kafka_stream, run_job

pytestmark = pytest.mark.integration
Count = message_class("dagger.examples.BookingCountMessage")
Summary = message_class("dagger.examples.BookingSummaryMessage")
Booking = message_class("dagger.examples.BookingLogMessage")


def _counts_per_minute_job(stencil, broker, source: str, out: str) -> dict:
    """Bookings per service area and 1-minute tumbling window (Dagger syntax), Kafka in and out."""
    sql = (
        "SELECT service_area_id, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp "
        "FROM `data_stream_0` GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
    )
    return job(
        stencil, [kafka_stream(broker, source)], sql, **kafka_sink(broker, out, "dagger.examples.BookingCountMessage")
    )


def test_tumbling_window_in_dagger_syntax_gives_exact_counts(spark, broker, stencil, topic, tmp_path):
    source, out = topic("bookings", partitions=2), topic("counts")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(360, START, step_seconds=0.5)), partitions=2)
    data = _counts_per_minute_job(stencil, broker, source, out)
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = [Count.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=6)]
    got = sorted((r.service_area_id, r.window_timestamp.ToDatetime(dt.UTC).minute, r.booking_count) for r in rows)
    # 3 minutes of events; the watermark (max - 10 s) closes the windows ending 10:01 and 10:02 only
    assert got == sorted((area, minute, 40) for area in AREAS for minute in (1, 2))


def test_topics_by_regex_over_several_partitions_and_committed_offsets(spark, broker, stencil, topic, tmp_path):
    a, b, other, out = topic("rx-a", 3), topic("rx-b", 2), topic("zz-other", 1), topic("rx-out")
    produce(broker.bootstrap, a, ((None, v) for v in bookings(90, START)), partitions=3)
    produce(broker.bootstrap, b, ((None, v) for v in bookings(40, START)), partitions=2)
    produce(broker.bootstrap, other, ((None, v) for v in bookings(7, START)), partitions=1)
    stream = kafka_stream(broker, f"{a}|{b}")
    sql = "SELECT order_number, customer_id FROM data_stream_0"
    # a local producer queue of 16 records: produce_batch refuses most of each batch, the sink retries them
    sink = kafka_sink(
        broker,
        out,
        "dagger.examples.BookingSummaryMessage",
        SINK_KAFKA_PRODUCER_CONFIG='{"queue.buffering.max.messages": "16"}',
    )
    data = job(stencil, [stream], sql, **sink)
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = [Summary.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=130)]
    assert len(rows) == 130
    assert collections.Counter(r.order_number for r in rows) == collections.Counter(
        [f"order-{i}" for i in range(90)] + [f"order-{i}" for i in range(40)]
    )
    # the processed offsets are committed to the group, visible to any Kafka admin tool
    reader = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"]}
    )
    committed = reader.committed(
        [TopicPartition(a, p) for p in range(3)] + [TopicPartition(b, p) for p in range(2)], timeout=10
    )
    reader.close()
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in committed) == sorted(
        [(a, p, 30) for p in range(3)] + [(b, p, 20) for p in range(2)]
    )


def test_nested_enum_map_and_repeated_fields_in_sql_reach_nested_output_fields(spark, broker, stencil, topic, tmp_path):
    source, out = topic("nested"), topic("nested-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(12, START)))
    sql = (
        "SELECT order_number, service_type, driver_pickup_location.name AS `pickup.name`, "
        "driver_pickup_location.latitude AS `pickup.latitude`, metadata['parity'] AS customer_id, "
        "filter(item_tags, t -> t != 'all') AS item_tags, map('n', order_number) AS metadata, rowtime AS event_timestamp "
        "FROM data_stream_0 WHERE service_type = 'GO_SEND' AND size(item_tags) = 2"
    )
    data = job(
        stencil, [kafka_stream(broker, source)], sql, **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage")
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = sorted(
        (Summary.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=4)),
        key=lambda r: r.order_number,
    )
    assert [r.order_number for r in rows] == ["order-1", "order-10", "order-4", "order-7"]
    first = rows[0]
    assert first.service_type == 2  # GO_SEND, written back by name
    assert first.pickup.name == "pickup-1" and first.pickup.latitude == pytest.approx(-6.199)
    assert first.customer_id == "odd" and list(first.item_tags) == ["tag1"] and dict(first.metadata) == {"n": "order-1"}
    assert first.event_timestamp.ToDatetime(dt.UTC) == START + dt.timedelta(seconds=1)


def test_two_stream_join(spark, broker, stencil, topic, tmp_path):
    left, right, out = topic("join-bookings"), topic("join-customers"), topic("join-out")
    produce(broker.bootstrap, left, ((None, v) for v in bookings(20, START)))
    # only customers c0..c2 exist; bookings of c3 and c4 find no match
    produce(broker.bootstrap, right, ((None, v) for v in customers(3, START)))
    streams = [
        kafka_stream(broker, left, table="bookings"),
        kafka_stream(broker, right, table="customers", proto="dagger.examples.CustomerLogMessage", ts=4),
    ]
    sql = (
        "SELECT b.order_number, c.name AS customer_id FROM bookings b JOIN customers c ON b.customer_id = c.customer_id "
        "AND b.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL '5' MINUTE"
    )
    data = job(stencil, streams, sql, **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"))
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = [Summary.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=12)]
    expected = sorted((f"order-{i}", f"name-{i % 5}") for i in range(20) if i % 5 < 3)
    assert sorted((r.order_number, r.customer_id) for r in rows) == expected


def _with_malformed(count: int) -> list[bytes]:
    values = bookings(count, START)
    values.insert(3, b"\xff\xff\xff not a booking")
    return values


def test_invalid_record_policy_fail_names_topic_partition_and_offset(spark, broker, stencil, topic, tmp_path):
    source = topic("bad-fail")
    produce(broker.bootstrap, source, ((None, v) for v in _with_malformed(8)))
    data = job(stencil, [kafka_stream(broker, source)], "SELECT order_number FROM data_stream_0")
    _, query = run_job(spark, data, tmp_path / "cp")
    error = str(query.exception())
    assert f"record at topic {source} partition 0 offset 3 cannot be decoded" in error
    assert "SOURCE_KAFKA_INVALID_RECORD_POLICY" in error


def test_security_keys_reach_librdkafka_and_a_failed_login_names_the_cause(spark, stencil, tmp_path):
    from types import SimpleNamespace

    from testing.broker import Broker, Listener

    # a broker that requires SASL: the stream's SCRAM login (an unknown user) must reach it and its refusal must
    # come back as the reason, not as a bare metadata timeout
    listener = Listener("SASL_PLAINTEXT", users={"alice": "right"}, mechanisms=("SCRAM-SHA-512",))
    with Broker(listener=listener) as broker:
        secured = SimpleNamespace(bootstrap=broker.secure_bootstrap)
        stream = kafka_stream(
            secured,
            "anything",
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_PLAINTEXT",
            SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM="SCRAM-SHA-512",
            SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG=(
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="mallory" password="${NO_SUCH_SECRET:-guess}";'
            ),
        )
        _, query = run_job(spark, job(stencil, [stream], "SELECT order_number FROM data_stream_0"), tmp_path / "cp")
    error = str(query.exception())
    assert f"stream 'data_stream_0': cannot list topics on {secured.bootstrap}" in error
    assert (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
        in error
    )


def test_invalid_record_policy_drop_counts_and_keeps_every_good_record(spark, broker, stencil, topic, tmp_path):
    source, out = topic("bad-drop"), topic("bad-drop-out")
    produce(broker.bootstrap, source, ((None, v) for v in _with_malformed(8)))
    stream = kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")
    data = job(
        stencil,
        [stream],
        "SELECT order_number FROM data_stream_0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = [Summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, expected=8)]
    assert sorted(rows) == sorted(f"order-{i}" for i in range(8))
    assert dropped(query) == 1


def test_invalid_record_policy_dead_letter_writes_raw_bytes_with_reason_and_coordinates(
    spark, broker, stencil, topic, tmp_path
):
    source, out, dlq = topic("bad-dlq"), topic("bad-dlq-out"), topic("bad-dlq-dead")
    produce(broker.bootstrap, source, ((None, v) for v in _with_malformed(8)))
    stream = kafka_stream(
        broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="dead-letter", SOURCE_KAFKA_DEAD_LETTER_TOPIC=dlq
    )
    data = job(
        stencil,
        [stream],
        "SELECT order_number FROM data_stream_0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert len(consume_all(broker.bootstrap, out, expected=8)) == 8
    dead = consume_all(broker.bootstrap, dlq, expected=1)
    assert len(dead) == 1
    assert dead[0].value() == b"\xff\xff\xff not a booking"
    headers = {k: v.decode() for k, v in dead[0].headers()}
    assert headers["dagger.topic"] == source and headers["dagger.partition"] == "0" and headers["dagger.offset"] == "3"
    assert "not a valid dagger.examples.BookingLogMessage" in headers["dagger.reason"]


def test_sql_that_does_not_fit_the_sink_message_is_refused_before_start(spark, broker, stencil, topic, tmp_path):
    from dagger.job import Job, load_config

    source = topic("misfit")
    sql = "SELECT item_tags AS order_number FROM data_stream_0"
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        **kafka_sink(broker, "unused", "dagger.examples.BookingSummaryMessage"),
    )
    plan = Job(load_config(data=data), checkpoint_dir=str(tmp_path), spark=spark).validate()
    assert any(
        "column 'order_number' (ARRAY<STRING>) cannot be written to field 'order_number'" in p for p in plan.problems
    )
    assert plan.output_mode == "append"
    assert not list(tmp_path.iterdir())  # nothing started, nothing checkpointed


@pytest.mark.parametrize(("retention", "mode"), [("10", "append"), ("0", "update")])
def test_non_windowed_aggregation_emits_each_keys_new_result(spark, broker, stencil, topic, tmp_path, retention, mode):
    source, out = topic("upd"), topic("upd-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(9, START)))
    sql = "SELECT service_area_id, count(1) AS booking_count FROM data_stream_0 GROUP BY service_area_id"
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        FLINK_RETENTION_IDLE_STATE_MINUTE=retention,
        **kafka_sink(broker, out, "dagger.examples.BookingCountMessage"),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    # with a retention the running form (transformWithState) appends each key's new result; without one, Spark's
    # own aggregation refuses append and runs in update mode
    assert manager.planned.output_mode == mode
    rows = [Count.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=3)]
    assert sorted((r.service_area_id, r.booking_count) for r in rows) == [(a, 3) for a in sorted(AREAS)]


def test_undecodable_records_go_to_the_jobs_dead_letter_files(spark, broker, stencil, topic, tmp_path):
    import base64
    import json

    source, out = topic("bad-files"), topic("bad-files-out")
    produce(broker.bootstrap, source, ((None, v) for v in _with_malformed(8)))
    stream = kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="dead-letter")
    data = job(
        stencil,
        [stream],
        "SELECT order_number FROM data_stream_0",
        DEAD_LETTER_PATH=str(tmp_path / "dlq"),
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert len(consume_all(broker.bootstrap, out, expected=8)) == 8
    [file] = list((tmp_path / "dlq").glob("source-data_stream_0-*.jsonl"))
    letter = json.loads(file.read_text())
    assert base64.b64decode(letter["value_base64"]) == b"\xff\xff\xff not a booking"
    assert letter["coordinates"] == {
        "topic": source,
        "partition": 0,
        "offset": 3,
        "message": "dagger.examples.BookingLogMessage",
    }
    assert letter["origin"] == "source" and letter["stream"] == "data_stream_0"
    assert letter["error_type"] == "DESERIALIZATION_ERROR"
    assert "not a valid dagger.examples.BookingLogMessage" in letter["reason"]


def test_kafka_sink_rejects_only_the_rows_its_message_cannot_take(spark, broker, stencil, topic, tmp_path):
    import json

    source, out = topic("rej-src"), topic("rej-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(30, START)))
    sql = (
        "SELECT order_number, CASE WHEN amount_paid_by_cash IN (50, 170, 290) THEN 'GO_TELEPORT' "
        "ELSE service_type END AS service_type FROM data_stream_0"
    )
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        DEAD_LETTER_PATH=str(tmp_path / "dlq"),
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    written = [Summary.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=27)]
    assert sorted(r.order_number for r in written) == sorted(f"order-{i}" for i in range(30) if i not in (5, 17, 29))
    letters = [
        json.loads(line) for f in (tmp_path / "dlq").glob("sink-kafka-*.jsonl") for line in f.read_text().splitlines()
    ]
    assert sorted(letter["row"]["order_number"] for letter in letters) == ["order-17", "order-29", "order-5"]
    assert {letter["error_type"] for letter in letters} == {"INVALID_MESSAGE_ERROR"}
    assert all("'GO_TELEPORT', which is not a value of enum" in letter["reason"] for letter in letters)
    assert manager.counters.sinks["kafka"]["dead_letters"].value == 3
    assert manager.counters.sinks["kafka"]["written"].value == 27


def test_local_checkpoints_are_written_without_hadoop_filecontext_and_remote_ones_keep_sparks_default(
    spark, broker, stencil, topic, tmp_path
):
    from dagger.job import Job, load_config

    key = "spark.sql.streaming.checkpointFileManagerClass"
    source, out = topic("cp-in"), topic("cp-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(240, START, step_seconds=0.5)))
    data = _counts_per_minute_job(stencil, broker, source, out)
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert spark.conf.get(key).endswith("FileSystemBasedCheckpointFileManager")
    # offsets, commits and the window state were all written through it, and a restart reads them back
    assert (tmp_path / "cp" / "commits" / "1").exists() and list((tmp_path / "cp" / "state").rglob("*.delta"))
    _, again = run_job(spark, data, tmp_path / "cp")
    assert again.exception() is None
    assert again.recentProgress[0]["batchId"] >= 2  # resumed after the committed batches
    assert sum(p["numInputRows"] for p in again.recentProgress) == 0  # nothing read twice

    from dagger.session.tuning import tune

    remote = Job(load_config(data=data), checkpoint_dir="s3a://bucket/job", spark=spark)
    tune(spark, remote.config, remote.context.store.local, {})
    assert spark.conf.get(key, None) is None  # back to Spark's FileContext-based default
    spark.conf.set(key, "org.example.MyManager")  # as spark-submit --conf would
    chosen = Job(
        load_config(data=dict(data, SPARK_CONF={key: "org.example.MyManager"})), checkpoint_dir=str(tmp_path / "x")
    )
    tune(spark, chosen.config, True, {})
    assert spark.conf.get(key) == "org.example.MyManager"  # a class the user names is theirs to set
    spark.conf.unset(key)


def test_arrow_batches_are_capped_by_rows_unless_records_may_be_large(spark, broker, stencil, topic, tmp_path):
    from dagger.job import load_config

    key = "spark.sql.execution.arrow.maxBytesPerBatch"
    source, out = topic("cap-in"), topic("cap-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(50, START)))
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT order_number, driver_pickup_location AS pickup FROM data_stream_0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert spark.conf.get(key) == "2147483647"  # Spark skips its per-row size check
    assert len(consume_all(broker.bootstrap, out, expected=50)) == 50

    from dagger.session.tuning import tune

    def sized(**extra) -> str | None:
        tune(spark, load_config(data=dict(data, **extra)), True, {})
        return spark.conf.get(key, None)

    assert sized(SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE="true") in (None, "67108864b")  # Spark's byte cap is back
    assert sized() == "2147483647"
    assert sized(SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE="true") in (None, "67108864b")
    spark.conf.set(key, "1000000")
    assert sized(SPARK_CONF={key: "1000000"}) == "1000000"  # the user's own value stays
    spark.conf.unset(key)


def test_streams_reading_the_same_topic_each_commit_their_own_position_to_their_own_group(
    spark, broker, stencil, topic, tmp_path
):
    """Overlapping topic patterns: each stream's final offsets go to its group only (they were matched by topic
    pattern, so each group got both streams' positions, the last one written winning)."""
    import time

    from dagger.job import Job, load_config

    shared = topic("overlap")
    produce(broker.bootstrap, shared, ((None, v) for v in bookings(60, START)))
    a = kafka_stream(broker, shared)  # from the beginning
    b = kafka_stream(
        broker,
        f"{shared}|no-such-topic",
        table="data_stream_1",
        SOURCE_KAFKA_STARTING_OFFSETS=f'{{"{shared}": {{"0": 20}}}}',
    )
    sql = "SELECT order_number, customer_id FROM data_stream_0 UNION ALL SELECT order_number, customer_id FROM data_stream_1"
    # the first micro-batch after a start reads one read batch (5 records) per partition; the next would come in 10 min
    data = job(stencil, [a, b], sql, SPARK_KAFKA_READ_BATCH_SIZE="5", SPARK_TRIGGER_INTERVAL_MS="600000")
    manager = Job(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), spark=spark)
    query = manager.start()
    try:
        deadline = time.monotonic() + 120
        while not (query.lastProgress and query.lastProgress["numInputRows"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert query.lastProgress["numInputRows"] == 10
    finally:
        query.stop()
    manager.finish(query)
    committed = {}
    for stream in (a, b):
        reader = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"]}
        )
        (tp,) = reader.committed([TopicPartition(shared, 0)], timeout=10)
        reader.close()
        committed[stream["INPUT_SCHEMA_TABLE"]] = tp.offset
    assert committed == {"data_stream_0": 5, "data_stream_1": 25}


def test_dead_letters_of_bounded_runs_carry_the_runs_batch_id(spark, broker, stencil, topic, tmp_path):
    """A bounded run is one batch with its own id (0, then 1 for new input): the source's undecodable records
    and the sink's rejected rows name it, as a micro-batch's do (they said -1)."""
    import json

    source, out, dlq = topic("bounded-dl"), topic("bounded-dl-out"), tmp_path / "dlq"
    values = bookings(30, START)
    values.insert(3, b"\xff\xff\xff not a booking")
    produce(broker.bootstrap, source, ((None, v) for v in values))
    sql = (
        "SELECT order_number, CASE WHEN amount_paid_by_cash IN (50, 170, 290) THEN 'GO_TELEPORT' "
        "ELSE service_type END AS service_type FROM data_stream_0"
    )

    def run(first: int, last: int) -> list[dict]:
        stream = kafka_stream(
            broker,
            source,
            SOURCE_KAFKA_INVALID_RECORD_POLICY="dead-letter",
            SOURCE_KAFKA_STARTING_OFFSETS=f'{{"{source}": {{"0": {first}}}}}',
            SOURCE_KAFKA_ENDING_OFFSETS=f'{{"{source}": {{"0": {last}}}}}',
        )
        data = job(
            stencil,
            [stream],
            sql,
            DEAD_LETTER_PATH=str(dlq),
            **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
        )
        manager, query = run_job(spark, data, tmp_path / "cp")
        assert manager.bounded and query.exception() is None, str(query.exception())[:2000]
        return [json.loads(line) for f in sorted(dlq.glob("*.jsonl")) for line in f.read_text().splitlines()]

    letters = run(0, 16)  # the undecodable record (offset 3) and order-5 (amount 50), in batch 0
    assert sorted((x["origin"], x["coordinates"].get("batch_id")) for x in letters) == [("sink", 0), ("source", None)]
    assert [f.name.split("-")[2] for f in dlq.glob("source-*.jsonl")] == ["0"]  # data_stream_0: the batch id
    for f in dlq.glob("*.jsonl"):
        f.unlink()
    letters = run(16, 31)  # new input: batch 1 (order-17 and order-29 have amount 50 as well)
    assert sorted(x["coordinates"]["batch_id"] for x in letters) == [1, 1]


def test_a_transactional_topic_is_read_as_kafka_clients_read_it(spark, broker, stencil, topic, tmp_path):
    """Transaction markers and an aborted transaction's records leave gaps in a partition's offsets, and the
    partition's last offset is a marker: the job reads the committed records exactly, once, and its range ends."""
    from confluent_kafka import Producer

    from tests.conftest import output_rows

    source, out = topic("txn"), topic("txn-out")
    values = bookings(12, START)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-{source}"})
    producer.init_transactions(30)
    for batch, commit in ((values[:5], True), (values[5:8], False), (values[8:], True)):
        producer.begin_transaction()
        for value in batch:
            producer.produce(source, value=value, partition=0)
        producer.flush(30)  # on the broker before the abort: an abort purges what is still queued locally
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-check"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(source, 0), timeout=10)
    finally:
        consumer.close()
    assert high == 15  # 12 records and 3 markers: offsets hold gaps, the last one a commit marker
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT order_number FROM data_stream_0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = output_rows(broker, manager, out, expected=9)
    committed = [f"order-{i}" for i in [*range(5), *range(8, 12)]]
    assert sorted(Summary.FromString(m.value()).order_number for m in rows) == sorted(committed)
    end = query.lastProgress["sources"][0]["endOffset"]
    assert (json.loads(end) if isinstance(end, str) else end)[f"{source}:0"] == 15  # the range reached the end


def _group_offsets(broker, group: str, source: str, partitions: int) -> list[int]:
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(source, p) for p in range(partitions)], timeout=10)
    finally:
        reader.close()
    return [tp.offset for tp in committed]


def test_auto_commit_false_leaves_the_consumer_group_alone_and_true_commits(spark, broker, stencil, topic, tmp_path):
    source = topic("autocommit", 2)
    produce(broker.bootstrap, source, ((None, v) for v in bookings(10, START)), partitions=2)
    sql = "SELECT order_number FROM data_stream_0"
    off = kafka_stream(broker, source, SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE="false")
    _, query = run_job(spark, job(stencil, [off], sql), tmp_path / "off")
    assert query.lastProgress["numInputRows"] + sum(p["numInputRows"] for p in query.recentProgress[:-1]) == 10
    assert _group_offsets(broker, off["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"], source, 2) == [-1001, -1001]
    on = kafka_stream(broker, source, SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE="true")
    _, query = run_job(spark, job(stencil, [on], sql), tmp_path / "on")
    assert _group_offsets(broker, on["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"], source, 2) == [5, 5]


@pytest.mark.parametrize("key", ["SINK_KAFKA_PROTO_KEY", "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS"])
def test_the_kafka_sink_encodes_each_record_key_with_the_key_message(spark, broker, stencil, topic, tmp_path, key):
    source, out = topic(f"keyed-{key[-5:].lower()}"), topic(f"keyed-out-{key[-5:].lower()}")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(4, START)))
    sql = "SELECT order_number, customer_id, service_area_id FROM data_stream_0"
    sink = kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage", **{key: "dagger.examples.BookingLogKey"})
    _, query = run_job(spark, job(stencil, [kafka_stream(broker, source)], sql, **sink), tmp_path / "cp")
    assert query.exception() is None
    Key = message_class("dagger.examples.BookingLogKey")  # noqa: N806
    keys = sorted(
        (k.order_number, k.service_area_id)
        for k in (Key.FromString(m.key()) for m in consume_all(broker.bootstrap, out, expected=4))
    )
    expected = sorted((f"order-{i}", AREAS[i % len(AREAS)]) for i in range(4))
    assert keys == expected
