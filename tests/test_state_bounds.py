"""Idle-state retention: Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE idle minutes; Spark
cannot, so every operator whose state grows forever is named, with how to bound it, by `dagger validate` and at
start."""

from __future__ import annotations

import json

import pytest

from dagger.sql.state import unbounded_state
from tests.conftest import dagger, job, kafka_stream


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT customer_id, COUNT(1) FROM s GROUP BY customer_id", ["GROUP BY customer_id keeps a running result"]),
        ("SELECT a, COUNT(1) FROM s GROUP BY a, window(rowtime, '1 minute')", []),
        ("SELECT a, COUNT(1) FROM s GROUP BY a, session_window(rowtime, '1 minute')", []),
        ("SELECT DISTINCT a FROM s", ["SELECT DISTINCT keeps every distinct row forever"]),
        ("SELECT b.x FROM b JOIN c ON b.k = c.k", ["the join with c keeps every row of both sides forever"]),
        (
            "SELECT b.x FROM b JOIN c ON b.k = c.k AND b.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL '5' MINUTE",
            [],
        ),
        ("SELECT b.x FROM b JOIN c ON b.k = c.k AND b.rowtime >= c.rowtime", []),
        ("SELECT x FROM s WHERE y > 1", []),
        ("SELECT x FROM s LATERAL VIEW explode(tags) t AS tag", []),
    ],
)
def test_operators_whose_state_grows_forever_are_named(sql, expected):
    found = unbounded_state(sql)
    assert len(found) == len(expected)
    for sentence, start in zip(found, expected, strict=True):
        assert sentence.startswith(start)


def test_validate_and_the_start_log_name_unbounded_state_with_daggers_retention(broker, stencil, tmp_path):
    sql = "SELECT customer_id, COUNT(1) AS booking_count FROM data_stream_0 GROUP BY customer_id"
    path = tmp_path / "job.json"
    path.write_text(
        json.dumps(job(stencil, [kafka_stream(broker, "nothing-yet")], sql, FLINK_RETENTION_IDLE_STATE_MINUTE="30"))
    )
    done = dagger("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert (
        "state without bound (Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE=30 idle minutes; "
        "Spark has no such retention and keeps it):\n  - GROUP BY customer_id keeps a running result for every key "
        "forever (no window)"
    ) in done.stdout
    windowed = job(
        stencil,
        [kafka_stream(broker, "nothing-yet")],
        "SELECT customer_id, COUNT(1) AS n FROM data_stream_0 GROUP BY customer_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)",
    )
    path.write_text(json.dumps(windowed))
    done = dagger("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert "state without bound" not in done.stdout


@pytest.mark.integration
def test_a_job_with_unbounded_state_says_so_when_it_starts(spark, broker, stencil, topic, tmp_path, caplog):
    from dagger.devtools.produce import produce
    from dagger.devtools.samples import bookings
    from tests.conftest import START, run_job

    source = topic("unbounded")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    sql = "SELECT customer_id, COUNT(1) AS n FROM data_stream_0 GROUP BY customer_id"
    with caplog.at_level("WARNING", logger="dagger"):
        _, query = run_job(spark, job(stencil, [kafka_stream(broker, source)], sql), tmp_path / "cp")
    assert query.exception() is None
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("state without bound")]
    assert warnings == [
        "state without bound: GROUP BY customer_id keeps a running result for every key forever (no window): group "
        "by a TUMBLE or HOP window as well to have the watermark drop old keys (Dagger drops a key's state after "
        "FLINK_RETENTION_IDLE_STATE_MINUTE=10 idle minutes; Spark has no such retention and keeps it)"
    ]


def test_a_join_of_two_streams_without_a_time_bound_gets_daggers_retention_as_one():
    from dagger.sql.rewrite import rewrite_query

    sql = "SELECT b.order_number, c.name FROM bookings b JOIN customers c ON b.customer_id = c.customer_id"
    tables = {"bookings": None, "customers": None}
    bounded = rewrite_query(sql, schemas=tables, retention_minutes=10)
    assert bounded.sql.endswith(
        "ON (b.customer_id = c.customer_id) AND b.rowtime BETWEEN c.rowtime - INTERVAL '10' MINUTE AND c.rowtime + "
        "INTERVAL '10' MINUTE"
    )
    assert bounded.notes[0].startswith("JOIN of b and c has no time bound: rows join within 10 minutes")
    assert unbounded_state(bounded.sql) == []
    assert rewrite_query(sql, schemas=tables, retention_minutes=0).sql == sql  # 0: as written, state forever
    timed = sql + " AND b.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL '5' MINUTE"
    assert rewrite_query(timed, schemas=tables, retention_minutes=10).notes == []  # bounded already: untouched


@pytest.mark.integration
@pytest.mark.parametrize(("minutes", "joined"), [(10, 11), pytest.param(0, 21, marks=pytest.mark.variant)])
def test_join_retention_decides_which_late_rows_still_join(spark, broker, stencil, topic, tmp_path, minutes, joined):
    import datetime as dt

    from dagger.devtools.produce import consume_all, produce
    from dagger.devtools.samples import message_class
    from tests.conftest import START, json_sink, run_job

    left, right, out = topic("ret-bookings"), topic("ret-customers"), topic("ret-out")
    Booking = message_class("dagger.examples.BookingLogMessage")
    Customer = message_class("dagger.examples.CustomerLogMessage")
    bookings = []
    for i in range(21):  # one booking a minute for 20 minutes, all by customer c0
        b = Booking(order_number=f"order-{i}", customer_id="c0")
        b.event_timestamp.FromDatetime(START + dt.timedelta(minutes=i))
        bookings.append(b.SerializeToString())
    customer = Customer(customer_id="c0", name="zero")
    customer.event_timestamp.FromDatetime(START)
    produce(broker.bootstrap, left, ((None, v) for v in bookings))
    produce(broker.bootstrap, right, [(None, customer.SerializeToString())])
    streams = [
        kafka_stream(broker, left, table="bookings"),
        kafka_stream(broker, right, table="customers", proto="dagger.examples.CustomerLogMessage", ts=4),
    ]
    sql = "SELECT b.order_number, c.name FROM bookings b JOIN customers c ON b.customer_id = c.customer_id"
    data = job(stencil, streams, sql, FLINK_RETENTION_IDLE_STATE_MINUTE=str(minutes), **json_sink(broker, out))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    rows = consume_all(broker.bootstrap, out, expected=joined)
    assert manager.sink_counters["kafka"]["written"].value == joined
    assert sorted(json.loads(m.value())["order_number"] for m in rows) == sorted(f"order-{i}" for i in range(joined))
