"""Longbow as a user meets it: ``dagger validate`` and ``dagger run`` of Longbow SQL (reference/dagger.md §4.8)."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest

from testing.produce import consume_all, produce
from testing.samples import bookings
from tests.conftest import START, dagger, job, kafka_stream, output_rows, run_job, validate_here

pytestmark = pytest.mark.integration

CLASSIC_SQL = (
    "SELECT customer_id AS longbow_key, order_number AS longbow_data1, event_timestamp, rowtime, "
    "'30d' AS longbow_duration FROM data_stream_0"
)


def _plan_error(spark, data: dict) -> str:
    """What planning ``data`` in the shared session refuses it with (as `dagger validate` and a start do)."""
    from dagger.errors import DaggerConfigError
    from dagger.job import Job, load_config

    with pytest.raises(DaggerConfigError) as refused:
        Job(load_config(data=data), spark=spark).validate()
    return str(refused.value)


def test_validate_names_the_longbow_kind_and_refuses_a_misfit_column(spark, broker, stencil, topic, tmp_path):
    streams = [kafka_stream(broker, topic("longbow-validate"))]
    good = job(stencil, streams, CLASSIC_SQL)
    (tmp_path / "good.json").write_text(json.dumps(good))
    result = validate_here(spark, str(tmp_path / "good.json"))
    assert result.returncode == 0, result.stderr
    assert "longbow: longbow (longbow_key), its range from longbow_duration" in result.stdout
    assert "replaced by their history (ARRAY<STRING>, most recent first)" in result.stdout
    # a number where Longbow stores strings: refused before anything runs, naming the column and the cast
    bad = dict(good, FLINK_SQL_QUERY=CLASSIC_SQL.replace("order_number AS", "amount_paid_by_cash AS"))
    assert "Longbow column 'longbow_data1' is BIGINT; Longbow needs STRING there" in _plan_error(spark, bad)
    both = dict(good, FLINK_SQL_QUERY=CLASSIC_SQL.replace("FROM", ", 0 AS longbow_latest FROM"))
    assert _plan_error(spark, both).endswith(
        "has both longbow_duration and longbow_latest; give the range one way: longbow_duration (e.g. '30d'), or "
        "both longbow_earliest and longbow_latest"
    )


def _longbow_job(stencil, broker, source: str | dict, out: str, sql: str, table: str, **extra) -> dict:
    return job(
        stencil,
        [source if isinstance(source, dict) else kafka_stream(broker, source)],
        sql,
        SINK_TYPE="kafka",
        SINK_KAFKA_BROKERS=broker.bootstrap,
        SINK_KAFKA_TOPIC=out,
        SINK_KAFKA_DATA_TYPE="JSON",
        PROCESSOR_LONGBOW_GCP_PROJECT_ID="longbow-test",
        PROCESSOR_LONGBOW_GCP_INSTANCE_ID="history",
        PROCESSOR_LONGBOW_GCP_TABLE_ID=table,
        SPARK_MAX_RECORDS_PER_TRIGGER="7",  # several micro-batches: histories span them
        **extra,
    )


def _by_order(rows: list) -> dict[str, dict]:
    decoded = [json.loads(m.value()) for m in rows]
    return {r["longbow_data1"][0]: r for r in decoded}


def test_classic_longbow_gives_each_row_its_keys_history_over_the_duration(
    spark, broker, stencil, topic, bigtable, tmp_path, monkeypatch
):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable.host)
    source, out = topic("longbow-src"), topic("longbow-out")
    # booking i: customer c{i % 5} at START + i minutes, so each customer books every 5 minutes
    produce(broker.bootstrap, source, ((None, v) for v in bookings(40, START, step_seconds=60)))
    table = f"history-{uuid.uuid4().hex[:6]}"
    sql = CLASSIC_SQL.replace("'30d'", "'10m'")
    data = _longbow_job(stencil, broker, source, out, sql, table, PROCESSOR_LONGBOW_DOCUMENT_DURATION="30d")
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = _by_order(output_rows(broker, manager, out, 40))
    assert len(rows) == 40
    for i in range(40):
        # the row itself, then the key's rows 5 and 10 minutes earlier: the range's far edge is inclusive
        expected = [f"order-{j}" for j in (i, i - 5, i - 10) if j >= 0]
        assert rows[f"order-{i}"]["longbow_key"] == f"c{i % 5}"
        assert rows[f"order-{i}"]["longbow_data1"] == expected, i
    counters = manager.counters.longbow.values()
    assert counters["success_on_write_document"] == 40 and counters["failed_on_write_document"] == 0
    assert counters["success_on_read_document"] == 40 and counters["failed_on_read_document"] == 0
    assert counters["documents_read_per_scan"] == sum(min(3, i // 5 + 1) for i in range(40))
    assert counters["failed_to_read_last_record"] == 0
    # the same counters as the job exports them (Dagger's longbow.writer / longbow.reader meters)
    from dagger.telemetry.metrics import JobMetrics

    exported = {
        (metric.name, tuple(sorted(labels.values()))): value
        for metric, labels, value in JobMetrics(manager).values()
        if metric.name.startswith("dagger_longbow")
    }
    assert exported[("dagger_longbow_rows_total", ("success", "writer"))] == 40
    assert exported[("dagger_longbow_rows_total", ("reader", "success"))] == 40
    assert exported[("dagger_longbow_rows_total", ("failed", "reader"))] == 0
    assert exported[("dagger_longbow_documents_read_total", ())] == counters["documents_read_per_scan"]
    # each Arrow batch: one MutateRows, then one ReadRows (its rows' ranges fit one call), none failed
    (writes, write_s), (reads, read_s) = (
        _calls(exported[("dagger_longbow_response_seconds", tuple(sorted((role, "success"))))])
        for role in ("writer", "reader")
    )
    assert writes == reads >= 1 and write_s > 0 and read_s > 0, (writes, reads)
    assert _calls(exported[("dagger_longbow_response_seconds", ("failed", "writer"))]) == (0, 0.0)
    assert _calls(exported[("dagger_longbow_response_seconds", ("failed", "reader"))]) == (0, 0.0)
    types = {
        labels["type"] for metric, labels, _ in JobMetrics(manager).values() if metric.name == "dagger_processor_info"
    }
    assert {"longbow_writer_processor", "longbow_reader_processor"} <= types, types
    # the table the job created: Dagger's column family and GC rule (one version, the document duration)
    from google.cloud import bigtable as client_library

    created = client_library.Client(project="longbow-test", admin=True).instance("history").table(table)
    from google.cloud.bigtable.column_family import GCRuleUnion, MaxAgeGCRule, MaxVersionsGCRule

    rule = created.list_column_families()["ts"].gc_rule
    assert rule == GCRuleUnion([MaxVersionsGCRule(1), MaxAgeGCRule(dt.timedelta(days=30))]), rule.to_pb()
    # a row as Dagger writes it: key#(Long.MAX_VALUE - rowtime ms), ts:<column> as UTF-8, cell time = rowtime
    stored = created.read_row(f"c3#{2**63 - 1 - int((START.timestamp() + 8 * 60) * 1000)}".encode())
    cell = stored.cells["ts"][b"longbow_data1"][0]
    assert cell.value == b"order-8" and cell.timestamp == START + dt.timedelta(minutes=8)


def test_classic_longbow_reads_rows_dagger_wrote_over_an_absolute_range(
    spark, broker, stencil, topic, bigtable, tmp_path, monkeypatch
):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable.host)
    from google.cloud import bigtable as client_library

    table = f"dagger-{uuid.uuid4().hex[:6]}"
    existing = client_library.Client(project="longbow-test", admin=True).instance("history").table(table)
    existing.create(column_families={"ts": None})
    # written by Dagger's LongbowWriter before the migration: c0 five minutes before the first booking
    before = START - dt.timedelta(minutes=5)
    row = existing.direct_row(f"c0#{2**63 - 1 - int(before.timestamp() * 1000)}".encode())
    row.set_cell("ts", b"longbow_data1", b"from-dagger", timestamp=before)
    row.commit()
    source, out = topic("longbow-abs-src"), topic("longbow-abs-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(12, START, step_seconds=60)))
    start_ms = int((START - dt.timedelta(hours=1)).timestamp() * 1000)
    sql = (
        "SELECT customer_id AS longbow_key, order_number AS longbow_data1, event_timestamp, rowtime, "
        f"CAST({start_ms} AS BIGINT) AS longbow_earliest, unix_millis(rowtime) AS longbow_latest FROM data_stream_0"
    )
    manager, query = run_job(spark, _longbow_job(stencil, broker, source, out, sql, table), tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = _by_order(output_rows(broker, manager, out, 12))
    # everything of the key from an hour before the first booking up to the row: Dagger's row included
    assert rows["order-0"]["longbow_data1"] == ["order-0", "from-dagger"]
    assert rows["order-5"]["longbow_data1"] == ["order-5", "order-0", "from-dagger"]
    assert rows["order-10"]["longbow_data1"] == ["order-10", "order-5", "order-0", "from-dagger"]
    assert rows["order-11"]["longbow_data1"] == ["order-11", "order-6", "order-1"]  # c1: nothing from Dagger
    assert rows["order-4"]["longbow_data1"] == ["order-4"]  # a key with no history but itself
    read = manager.counters.longbow.values()["documents_read_per_scan"]
    assert read == sum(len(r["longbow_data1"]) for r in rows.values()) == 24


def test_the_longbow_example_config_runs(broker, stencil, topic, bigtable, tmp_path):
    source = topic("longbow-example")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(15, START, step_seconds=60)))
    env = {
        **bigtable.env,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "DESCRIPTOR_URL": stencil.url("examples.desc"),
        "SOURCE_TOPIC": source,
        "LONGBOW_TABLE": f"cash-{uuid.uuid4().hex[:6]}",
    }
    result = dagger("run", "configs/longbow.json", "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Longbow: created Bigtable table projects/dagger-local/instances/longbow/tables/cash-" in result.stderr
    rows = [line for line in result.stderr.splitlines() if line.startswith("{longbow_key=")]
    assert len(rows) == 15
    # customer c2 booked at minutes 2, 7 and 12 (cash = 10 x booking number): its last row sees all three
    assert "{longbow_key=c2, longbow_data_cash=[120, 70, 20], order_number=order-12," in "\n".join(rows)


def test_longbow_plus_end_to_end_a_reader_consumes_the_writers_log_and_selects_from_proto_data(
    spark, broker, stencil, topic, bigtable, tmp_path, monkeypatch
):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable.host)
    source, log_topic, out = topic("lbplus-src"), topic("lbplus-log"), topic("lbplus-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(20, START, step_seconds=60)))
    table = f"plus-{uuid.uuid4().hex[:6]}"
    writer_sql = (
        "SELECT customer_id AS longbow_write_key, order_number, customer_id, amount_paid_by_cash, event_timestamp, "
        "rowtime FROM data_stream_0"
    )
    writer, query = run_job(
        spark, _longbow_job(stencil, broker, source, log_topic, writer_sql, table), tmp_path / "writer"
    )
    assert query.exception() is None, query.exception()
    log = [json.loads(m.value()) for m in output_rows(broker, writer, log_topic, 20)]
    # the synchronizer log: the row, then the table, the message the rows were written as, and the read key
    first = next(r for r in log if r["order_number"] == "order-7")
    assert list(first)[-3:] == ["bigtable_table_id", "input_class_name", "longbow_read_key"]
    assert (first["bigtable_table_id"], first["input_class_name"], first["longbow_read_key"]) == (
        table,
        "dagger.examples.BookingLogMessage",
        "c2",
    )
    assert writer.counters.longbow.values()["success_on_write_document"] == 20
    # the reader consumes that log (JSON records): each row names its table and read key; a duration range keeps
    # rowtime in the reader's output: the SQLTransformer below gets it past the reader's mapInArrow, with the
    # source's watermark (a second one would be refused by Spark)
    log_schema = {
        "type": "object",
        "properties": {
            "longbow_read_key": {"type": "string"},
            "bigtable_table_id": {"type": "string"},
            "order_number": {"type": "string"},
            "event_timestamp": {"type": "string", "format": "date-time"},
        },
    }
    log_stream = kafka_stream(
        broker,
        log_topic,
        INPUT_DATATYPE="JSON",
        INPUT_SCHEMA_JSON_SCHEMA=json.dumps(log_schema),
        INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
    )
    for key in ("INPUT_SCHEMA_PROTO_CLASS", "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"):
        log_stream.pop(key)
    reader_sql = (
        "SELECT longbow_read_key, bigtable_table_id, order_number, event_timestamp, rowtime, "
        "'10m' AS longbow_duration FROM data_stream_0"
    )
    post = {
        "internal_source": [{"output_field": "*", "value": "*", "type": "sql"}],
        "transformers": [
            {
                "transformation_class": "SQLTransformer",
                "transformation_arguments": {
                    "sqlQuery": "SELECT order_number, size(proto_data) AS documents, "
                    "SelectFields(proto_data, 'dagger.examples.BookingLogMessage', 'order_number') AS orders, "
                    "SelectFields(Filters(proto_data, 'dagger.examples.BookingLogMessage', "
                    "CondEq('amount_paid_by_cash', '120')), 'order_number') AS paid_120 FROM data_stream"
                },
            }
        ],
    }
    reader_job = _longbow_job(
        stencil,
        broker,
        log_stream,
        out,
        reader_sql,
        table,
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
    )
    reader, query = run_job(spark, reader_job, tmp_path / "reader")
    assert query.exception() is None, query.exception()
    rows = {r["order_number"]: r for r in (json.loads(m.value()) for m in output_rows(broker, reader, out, 20))}
    for i in range(20):
        expected = [f"order-{j}" for j in (i, i - 5, i - 10) if j >= 0]
        assert rows[f"order-{i}"]["orders"] == expected, i
        assert rows[f"order-{i}"]["documents"] == len(expected)
    assert rows["order-17"]["paid_120"] == ["order-12"]  # cash 10 x booking number, c2's within 10 minutes
    assert rows["order-16"]["paid_120"] == []
    read = reader.counters.longbow.values()
    assert read["success_on_read_document"] == 20 and read["success_on_write_document"] == 0
    assert reader.counters.longbow.processor_types == ("longbow_reader_processor",)
    assert writer.counters.longbow.processor_types == ("longbow_writer_processor",)
    assert _calls(reader.counters.longbow.latency["reader", "success"].prometheus())[0] >= 1
    assert _calls(writer.counters.longbow.latency["writer", "success"].prometheus())[0] >= 1
    assert _calls(reader.counters.longbow.latency["writer", "success"].prometheus()) == (0, 0.0)


def test_a_failed_bigtable_read_is_counted_and_its_rows_pass_on_with_no_history(
    spark, broker, stencil, topic, bigtable, tmp_path, monkeypatch
):
    # a Longbow+ reader naming a table nobody wrote: every ReadRows fails (NOT_FOUND), as Dagger's failed read
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable.host)
    source, out = topic("lbfail-src"), topic("lbfail-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(12, START, step_seconds=60)))
    missing = f"never-written-{uuid.uuid4().hex[:6]}"
    sql = (
        f"SELECT customer_id AS longbow_read_key, '{missing}' AS bigtable_table_id, order_number, event_timestamp, "
        "rowtime, '10m' AS longbow_duration FROM data_stream_0"
    )
    manager, query = run_job(spark, _longbow_job(stencil, broker, source, out, sql, missing), tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(m.value()) for m in output_rows(broker, manager, out, 12)]
    assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(12))
    assert all(r["proto_data"] == [] for r in rows), rows
    counts = manager.counters.longbow.values()
    assert counts["failed_on_read_document"] == 12 and counts["success_on_read_document"] == 0
    from dagger.telemetry.metrics import JobMetrics

    exported = {
        (metric.name, tuple(sorted(labels.values()))): value for metric, labels, value in JobMetrics(manager).values()
    }
    assert exported[("dagger_longbow_rows_total", ("failed", "reader"))] == 12
    assert exported[("dagger_non_fatal_exceptions_total", ("LongbowReaderException",))] == 12
    failed_calls, _ = _calls(exported[("dagger_longbow_response_seconds", ("failed", "reader"))])
    assert failed_calls >= 1 and _calls(exported[("dagger_longbow_response_seconds", ("reader", "success"))])[0] == 0


def test_longbow_on_the_state_store_gives_the_bigtable_output_and_survives_a_restart(
    spark, broker, stencil, topic, tmp_path
):
    source, out = topic("longbow-state-src"), topic("longbow-state-out")
    values = bookings(40, START, step_seconds=60)
    produce(broker.bootstrap, source, ((None, v) for v in values[:25]))
    sql = CLASSIC_SQL.replace("'30d'", "'10m'")
    data = _longbow_job(stencil, broker, source, out, sql, "unused", PROCESSOR_LONGBOW_STORE="state")
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert manager.counters.longbow.values()["success_on_write_document"] == 25
    # the rest after a restart from the checkpoint: the histories go on from the state it kept
    produce(broker.bootstrap, source, ((None, v) for v in values[25:]))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = _by_order(consume_all(broker.bootstrap, out, expected=40))
    assert len(rows) == 40
    for i in range(40):  # what the Bigtable store gives for the same input (the test above)
        assert rows[f"order-{i}"]["longbow_data1"] == [f"order-{j}" for j in (i, i - 5, i - 10) if j >= 0], i
    assert manager.counters.longbow.values()["documents_read_per_scan"] == sum(
        min(3, i // 5 + 1) for i in range(25, 40)
    )


def test_the_state_store_appends_each_micro_batchs_entries_and_prunes_those_past_the_document_duration(
    spark, broker, stencil, topic, tmp_path
):
    # one key booking every minute; its history kept 15 minutes back from its newest booking, each row reading 2
    source, out = topic("longbow-prune-src"), topic("longbow-prune-out")
    values = bookings(40, START, step_seconds=60)
    produce(broker.bootstrap, source, ((None, v) for v in values[:14]))
    sql = (
        "SELECT 'one' AS longbow_key, order_number AS longbow_data1, event_timestamp, rowtime, "
        "'2m' AS longbow_duration FROM data_stream_0"
    )
    data = _longbow_job(
        stencil, broker, source, out, sql, "unused", PROCESSOR_LONGBOW_STORE="state",
        PROCESSOR_LONGBOW_DOCUMENT_DURATION="15m",
    )  # fmt: skip
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    entries = _stored_entries(spark, tmp_path / "cp")["one"]
    assert sorted(values[0] for _, values, _ in entries) == sorted(f"order-{i}" for i in range(14))
    # appended batch by batch: each batch's entries carry that batch's expiry (a rewrite gives all one expiry)
    assert batches >= 2 and len({expiry for _, _, expiry in entries}) == batches, (batches, entries)
    produce(broker.bootstrap, source, ((None, v) for v in values[14:]))
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = _by_order(consume_all(broker.bootstrap, out, expected=40))
    for i in range(40):
        assert rows[f"order-{i}"]["longbow_data1"] == [f"order-{j}" for j in (i, i - 1, i - 2) if j >= 0], i
    entries = _stored_entries(spark, tmp_path / "cp")["one"]
    stored = {ms: values for ms, values, _ in entries}
    live = [f"order-{i}" for i in range(40 - 16, 40)]  # 15 minutes back from order-39, both ends
    assert [stored[ms][0] for ms in sorted(stored)][-16:] == live
    # the dead are dropped once they outnumber the live: never all 40 (an append-only list), at most twice 16
    assert len(entries) <= 2 * len(live), sorted(stored)


def _stored_entries(spark, checkpoint) -> dict[str, list[tuple]]:
    """Each key's ``(ms, values, ttl expiry)`` entries in the Longbow state of a checkpoint, read with Spark's own
    state reader."""
    state = spark.read.format("statestore").option("stateVarName", "history").load(str(checkpoint))
    entries: dict[str, list[tuple]] = {}
    for row in state.collect():
        element = row["list_element"]
        entry = element["value"]
        entries.setdefault(row["key"][0], []).append((entry["ms"], list(entry["values"]), element["ttlExpirationMs"]))
    return entries


def test_the_state_store_refuses_longbow_plus(spark, broker, stencil, topic):
    sql = "SELECT customer_id AS longbow_write_key, order_number, event_timestamp, rowtime FROM data_stream_0"
    data = job(stencil, [kafka_stream(broker, topic("longbow-state-plus"))], sql, PROCESSOR_LONGBOW_STORE="state")
    assert "Longbow type longbow_write shares its table between jobs; use bigtable" in _plan_error(spark, data)


def test_an_unreachable_bigtable_stops_the_job_at_start_naming_table_place_and_cause(
    spark, broker, stencil, topic, tmp_path, monkeypatch
):
    from dagger.job import Job, load_config
    from dagger.longbow.bigtable import LongbowTableError
    from testing.broker import free_port

    data = job(
        stencil,
        [kafka_stream(broker, topic("longbow-down"))],
        CLASSIC_SQL,
        PROCESSOR_LONGBOW_ASYNC_TIMEOUT="2000",
        PROCESSOR_LONGBOW_GCP_TABLE_ID="history",
    )
    gone = f"127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", gone)
    manager = Job(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), spark=spark)
    with pytest.raises(LongbowTableError) as refused:
        manager.start()
    assert str(refused.value).startswith(
        f"Longbow cannot check or create its Bigtable table projects/default-gcp-project/instances/"
        f"default-gcp-project/tables/history at {gone} within 2 s (PROCESSOR_LONGBOW_ASYNC_TIMEOUT): "
        "ServiceUnavailable: failed to connect"
    )


def _calls(histogram: tuple[list[tuple[float, int]], float]) -> tuple[int, float]:
    """A histogram sample's calls (its +Inf bucket) and summed seconds."""
    buckets, seconds = histogram
    assert buckets[-1][0] == float("inf") and all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:], strict=False)), (
        buckets
    )
    return buckets[-1][1], seconds


@pytest.mark.long
@pytest.mark.chaos
def test_a_bigtable_that_stops_answering_mid_run_stops_the_job_with_a_clear_last_line(broker, stencil, topic, tmp_path):
    """As in Dagger, a Longbow call past PROCESSOR_LONGBOW_ASYNC_TIMEOUT is fatal. The emulator is frozen (SIGSTOP)
    once the job wrote its first rows: it holds its connections open and answers nothing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from testing.bigtable_emulator import BigtableEmulator
    from tests.conftest import ROOT

    source, out = topic("longbow-freeze"), topic("longbow-freeze-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(10, START)))
    table = f"freeze_{uuid.uuid4().hex[:6]}"
    data = _longbow_job(stencil, broker, source, out, CLASSIC_SQL, table, PROCESSOR_LONGBOW_ASYNC_TIMEOUT="2000")
    config = tmp_path / "job.json"
    config.write_text(json.dumps(data))
    with BigtableEmulator() as emulator:
        log = tmp_path / "run.log"
        with open(log, "w") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "dagger", "run", str(config), "--checkpoint-dir", str(tmp_path / "cp")],
                cwd=ROOT,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={**os.environ, **emulator.env},
            )
        frozen = False
        try:
            deadline = time.monotonic() + 180
            while len(consume_all(broker.bootstrap, out, idle_seconds=0.5, timeout=5)) < 10:
                assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            os.kill(emulator.process.pid, signal.SIGSTOP)
            frozen = True
            produce(broker.bootstrap, source, ((None, v) for v in bookings(20, START)[10:]))
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
            if frozen:
                os.kill(emulator.process.pid, signal.SIGCONT)
    assert process.returncode == 1, log.read_text()[-3000:]
    last = [line for line in log.read_text().splitlines() if line.strip()][-1]
    assert last.endswith(
        "ERROR dagger: query failed: LongbowTimeoutError: Longbow: a Bigtable write of projects/longbow-test/"
        f"instances/history/tables/{table} took longer than PROCESSOR_LONGBOW_ASYNC_TIMEOUT (2000 ms); a timeout "
        "stops the job, as in Dagger"
    ), last
