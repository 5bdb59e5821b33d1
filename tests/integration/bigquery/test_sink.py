"""The BigQuery sink against bqemulator (REST + Storage Write API), rows read back through queries."""

from __future__ import annotations

import collections
import datetime as dt
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pytest

from dagger.bigquery.sink import BigQuerySink
from dagger.catalog import build_sink
from dagger.checkpoint import CheckpointStore
from dagger.config.model import SinkConfig
from dagger.dead_letter import DeadLetterSpec
from dagger.errors import SinkError
from dagger.job.binding import bind_sink
from dagger.plugins.sink import SinkEnv
from testing.produce import consume_all, produce
from testing.samples import AREAS, SERVICES, bookings, example_descriptors, message_class
from tests.conftest import (
    START,
    bigquery_count,
    bigquery_keys,
    bigquery_rows,
    bigquery_table,
    job,
    kafka_stream,
    run_job,
)

pytestmark = pytest.mark.integration
Summary = message_class("dagger.examples.BookingSummaryMessage")


def _sink(bigquery, table: str, state_dir=None, **extra) -> BigQuerySink:
    sink = build_sink(bind_sink(SinkConfig(**bigquery_keys(bigquery, table, **extra))), SinkEnv(example_descriptors()))
    assert isinstance(sink, BigQuerySink)
    sink.label = "bigquery"
    sink.state = CheckpointStore(str(state_dir)) if state_dir else None
    return sink


def test_job_creates_the_table_from_the_proto_and_writes_typed_rows_to_two_sinks(
    spark, broker, stencil, bigquery, topic, tmp_path
):
    source, out, table = topic("bq-src"), topic("bq-out"), bigquery_table()
    produce(broker.bootstrap, source, ((None, v) for v in bookings(12, START)))
    sql = (
        "SELECT order_number, service_type, customer_id, event_timestamp, driver_pickup_location, "
        "item_tags, metadata, amount_paid_by_cash, service_area_id FROM data_stream_0"
    )
    sinks = [
        bigquery_keys(
            bigquery,
            table,
            SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE="true",
            SINK_BIGQUERY_TABLE_PARTITION_KEY="event_timestamp",
            SINK_BIGQUERY_TABLE_LABELS="team=data,env=test",
        ),
        {
            "SINK_TYPE": "kafka",
            "SINK_KAFKA_BROKERS": broker.bootstrap,
            "SINK_KAFKA_TOPIC": out,
            "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
        },
    ]
    data = job(stencil, [kafka_stream(broker, source)], sql, SINKS=json.dumps(sinks))
    del data["SINK_TYPE"]
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None

    created = bigquery.client().get_table(f"{bigquery.project}.dagger_tests.{table}")
    schema = {f.name: (f.field_type, f.mode) for f in created.schema}
    assert schema["driver_pickup_location"] == ("RECORD", "NULLABLE")
    assert [s.name for s in next(f for f in created.schema if f.name == "driver_pickup_location").fields] == [
        "name",
        "latitude",
        "longitude",
    ]
    assert schema["item_tags"] == ("STRING", "REPEATED")
    assert schema["metadata"] == ("RECORD", "REPEATED")
    assert schema["event_timestamp"] == ("TIMESTAMP", "NULLABLE")
    assert schema["service_type"] == ("STRING", "NULLABLE")
    assert created.time_partitioning.field == "event_timestamp"
    assert created.labels == {"team": "data", "env": "test"}

    rows = bigquery_rows(bigquery, table, order="amount_paid_by_cash")
    assert len(rows) == 12
    for i, row in enumerate(rows):
        assert row["order_number"] == f"order-{i}"
        assert row["service_type"] == SERVICES[i % 3]
        assert row["event_timestamp"] == START + dt.timedelta(seconds=i)
        assert row["driver_pickup_location"] == {
            "name": f"pickup-{i % 4}",
            "latitude": -6.2 + i * 0.001,
            "longitude": 106.8,
        }
        assert row["item_tags"] == [f"tag{i % 2}", "all"]
        assert row["metadata"] == [{"key": "parity", "value": "even" if i % 2 == 0 else "odd"}]
        assert row["service_area_id"] == AREAS[i % 3]
        assert row["status"] is None  # not selected by the SQL
    # the same rows reached the second sink, from the same single SQL run
    kafka_rows = [Summary.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=12)]
    assert sorted(r.order_number for r in kafka_rows) == sorted(f"order-{i}" for i in range(12))
    assert manager.counters.sinks["bigquery"]["written"].value == 12
    assert manager.counters.sinks["kafka"]["written"].value == 12


def test_a_replayed_micro_batch_is_not_written_twice(spark, broker, stencil, bigquery, topic, tmp_path):
    source, table = topic("bq-replay"), bigquery_table()
    produce(broker.bootstrap, source, ((None, v) for v in bookings(20, START)))
    sql = "SELECT order_number, amount_paid_by_cash FROM data_stream_0"
    data = job(stencil, [kafka_stream(broker, source)], sql, **bigquery_keys(bigquery, table))
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None and bigquery_count(bigquery, table) == 20
    produce(broker.bootstrap, source, ((None, v) for v in bookings(35, START)[20:]))
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None and bigquery_count(bigquery, table) == 35
    # a crash after BigQuery committed batch 1 but before Spark logged it: Spark runs batch 1 again
    commits = tmp_path / "cp" / "commits"
    assert sorted(p.name for p in commits.glob("[0-9]*")) == ["0", "1"]
    (commits / "1").unlink()
    (commits / ".1.crc").unlink(missing_ok=True)
    _, again = run_job(spark, data, tmp_path / "cp")
    assert again.exception() is None
    rerun = [p for p in again.recentProgress if p["batchId"] == 1]
    assert rerun and rerun[0]["numInputRows"] == 15  # the batch really was re-run, from Spark's offset log
    assert bigquery_count(bigquery, table) == 35
    assert sorted(r["amount_paid_by_cash"] for r in bigquery_rows(bigquery, table)) == [i * 10 for i in range(35)]
    assert (tmp_path / "cp" / "sinks" / "bigquery" / "batch-1.json").exists()


def test_without_insert_ids_rows_go_to_the_default_stream_and_a_replayed_micro_batch_is_written_again(
    spark, broker, stencil, bigquery, topic, tmp_path
):
    """SINK_BIGQUERY_ROW_INSERT_ID_ENABLE=false, what Dagger forces: at-least-once, as the test above is not."""
    source, table = topic("bq-default"), bigquery_table()
    produce(broker.bootstrap, source, ((None, v) for v in bookings(20, START)))
    sql = "SELECT order_number, amount_paid_by_cash FROM data_stream_0"
    keys = bigquery_keys(bigquery, table, SINK_BIGQUERY_ROW_INSERT_ID_ENABLE="false")
    data = job(stencil, [kafka_stream(broker, source)], sql, SPARK_MAX_RECORDS_PER_TRIGGER="12", **keys)
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None and bigquery_count(bigquery, table) == 20
    assert not (tmp_path / "cp" / "sinks" / "bigquery").exists()  # no write streams recorded: none to commit
    commits = tmp_path / "cp" / "commits"
    (commits / "1").unlink()  # batch 1 (8 rows) runs again
    (commits / ".1.crc").unlink(missing_ok=True)
    _, again = run_job(spark, data, tmp_path / "cp")
    assert again.exception() is None
    assert [p["numInputRows"] for p in again.recentProgress if p["batchId"] == 1] == [8]
    assert bigquery_count(bigquery, table) == 28
    assert collections.Counter(r["amount_paid_by_cash"] for r in bigquery_rows(bigquery, table)) == collections.Counter(
        [i * 10 for i in range(20)] + [i * 10 for i in range(12, 20)]
    )


def test_rows_the_message_cannot_take_go_to_the_dead_letter_topic(spark, broker, stencil, bigquery, topic, tmp_path):
    source, dead, table = topic("bq-bad"), topic("bq-dead"), bigquery_table()
    produce(broker.bootstrap, source, ((None, v) for v in bookings(10, START)))
    sql = (
        "SELECT order_number, CASE WHEN amount_paid_by_cash IN (30, 70) THEN 'NOT_A_SERVICE' ELSE service_type END "
        "AS service_type FROM data_stream_0"
    )
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        DEAD_LETTER_KAFKA_TOPIC=dead,
        DEAD_LETTER_KAFKA_BROKERS=broker.bootstrap,
        **bigquery_keys(bigquery, table),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert sorted(r["order_number"] for r in bigquery_rows(bigquery, table)) == sorted(
        f"order-{i}" for i in range(10) if i not in (3, 7)
    )
    letters = consume_all(broker.bootstrap, dead, expected=2)
    assert sorted(json.loads(m.value())["order_number"] for m in letters) == ["order-3", "order-7"]
    headers = {k: v.decode() for k, v in letters[0].headers()}
    assert headers["dagger.origin"] == "sink" and headers["dagger.sink"] == "bigquery"
    assert headers["dagger.error_type"] == "INVALID_MESSAGE_ERROR"
    assert "'NOT_A_SERVICE', which is not a value of enum dagger.examples.ServiceType" in headers["dagger.reason"]
    assert headers["dagger.batch_id"] == "0" and headers["dagger.job"] == data["FLINK_JOB_ID"]
    assert manager.counters.sinks["bigquery"]["dead_letters"].value == 2

    # the same rows fail the job when their error type is listed in SINK_ERROR_TYPES_FOR_FAILURE
    data["SINK_ERROR_TYPES_FOR_FAILURE"] = "INVALID_MESSAGE_ERROR,SINK_5XX_ERROR"
    data["SINK_BIGQUERY_TABLE_NAME"] = bigquery_table()
    data["STREAMS"] = json.dumps([kafka_stream(broker, source)])  # a new consumer group: read from the start
    _, failed = run_job(spark, data, tmp_path / "cp2")
    assert failed.exception() is not None
    assert "INVALID_MESSAGE_ERROR is listed in SINK_ERROR_TYPES_FOR_FAILURE" in str(failed.exception())


def test_a_row_the_server_refuses_is_isolated_and_dead_lettered(bigquery, tmp_path):
    table = bigquery_table()
    sink = _sink(bigquery, table, tmp_path / "state")
    sink.dead_letter = DeadLetterSpec("job", path=str(tmp_path / "dlq"))
    sink.prepare()
    batch = pa.RecordBatch.from_pydict(
        {
            "order_number": [f"o{i}" for i in range(6)],
            "customer_id": ["c", "c", "x" * 300_000, "c", "c", "c"],  # one row over the 256 KiB request cap
        }
    )
    writer = sink.writer(2, 9)
    writer.write(batch)
    result = writer.flush()
    sink.commit([result], 9)
    assert result["rows"] == 5 and result["dead_letters"] == 1
    assert [r["order_number"] for r in bigquery_rows(bigquery, table)] == ["o0", "o1", "o3", "o4", "o5"]
    [file] = list((tmp_path / "dlq").glob("sink-bigquery-9-2-*.jsonl"))
    letter = json.loads(file.read_text())
    assert letter["row"]["order_number"] == "o2" and letter["error_type"] == "SINK_4XX_ERROR"
    assert "size cap" in letter["reason"]


def test_new_proto_fields_are_added_to_an_existing_table(bigquery):
    from google.cloud import bigquery as bq

    table = bigquery_table()
    client = bigquery.client()
    client.create_dataset("dagger_tests", exists_ok=True)
    client.create_table(
        bq.Table(
            f"{bigquery.project}.dagger_tests.{table}",
            schema=[bq.SchemaField("order_number", "STRING"), bq.SchemaField("legacy", "INTEGER")],
        )
    )
    _sink(bigquery, table).prepare()
    fields = [f.name for f in client.get_table(f"{bigquery.project}.dagger_tests.{table}").schema]
    assert fields[:2] == ["order_number", "legacy"]  # existing columns kept, in place
    assert set(fields) == {"legacy"} | {
        f.name for f in example_descriptors().find_message("dagger.examples.BookingLogMessage").fields
    }


def test_every_proto_feature_round_trips(bigquery, tmp_path):
    table = bigquery_table()
    sink = _sink(bigquery, table, tmp_path / "s", SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS="dagger.test.Everything")
    sink.prepare()
    schema = {f.name: f for f in bigquery.client().get_table(f"{bigquery.project}.dagger_tests.{table}").schema}
    assert (schema["f_duration"].field_type, [f.name for f in schema["f_duration"].fields]) == (
        "RECORD",
        ["seconds", "nanos"],
    )
    assert schema["f_struct"].field_type == "STRING"
    assert schema["f_int64_wrapper"].field_type == "INTEGER"
    assert (schema["f_map_msg"].field_type, schema["f_map_msg"].mode) == ("RECORD", "REPEATED")
    assert schema["f_tree"].fields[1].field_type == "BYTES"  # recursive message kept serialized
    inner = pa.struct(
        [("label", pa.string()), ("weight", pa.int32()), ("color", pa.string()), ("values", pa.list_(pa.int64()))]
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "f_string": ["a"],
            "f_uint64": pa.array([2**40], pa.decimal128(20, 0)),
            "f_duration": pa.array([1_500_000], pa.int64()),
            "f_struct": ['{"k":1}'],
            "f_map_msg": pa.array(
                [[(7, {"label": "x", "weight": 1, "color": "RED", "values": [1, 2]})]], pa.map_(pa.int32(), inner)
            ),
            "f_enums": [["RED", "BLUE"]],
            "f_int64_wrapper": [5],
        }
    )
    writer = sink.writer(0, 0)
    writer.write(batch)
    sink.commit([writer.flush()], 0)
    [row] = bigquery_rows(bigquery, table, order="f_string")
    assert row["f_uint64"] == 2**40
    assert row["f_duration"] == {"seconds": 1, "nanos": 500_000_000}
    assert row["f_struct"] == '{"k":1}'
    assert row["f_map_msg"] == [{"key": 7, "value": {"label": "x", "weight": 1, "color": "RED", "values": [1, 2]}}]
    assert row["f_enums"] == ["RED", "BLUE"] and row["f_int64_wrapper"] == 5
    assert row["f_inners"] == []  # an absent repeated field is written empty (BigQuery has no NULL arrays)


def test_server_errors_are_retried_until_the_deadline_then_fail(bigquery):
    class Failing(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return None

        def _fail(self):
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            body = b'{"error": {"code": 500, "message": "backend error"}}'
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _fail  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = _sink(bigquery, bigquery_table(), SINK_BIGQUERY_RETRY_DEADLINE_MS="2000")
        sink.api_endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        started = time.monotonic()
        with pytest.raises(SinkError, match=r"did not answer within SINK_BIGQUERY_RETRY_DEADLINE_MS \(2000 ms\)"):
            sink.prepare()
        assert time.monotonic() - started < 30
    finally:
        server.shutdown()


def test_config_errors_name_the_key(bigquery):
    from dagger.errors import DaggerConfigError

    with pytest.raises(DaggerConfigError, match="SINK_BIGQUERY_TABLE_PARTITION_KEY: 'order_number' is not a google"):
        _sink(
            bigquery,
            "x",
            SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE="true",
            SINK_BIGQUERY_TABLE_PARTITION_KEY="order_number",
        )
    with pytest.raises(DaggerConfigError, match="SINK_BIGQUERY_TABLE_LABELS: 'team' must look like name=value"):
        _sink(bigquery, "x", SINK_BIGQUERY_TABLE_LABELS="team")
