"""The tests of tests/unit/sql/test_state_bounds.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json

import pytest

from tests.conftest import job, kafka_stream, validate_here


@pytest.mark.integration
@pytest.mark.parametrize(("minutes", "after_idle"), [("0.05", 1), pytest.param("0", 4, marks=pytest.mark.variant)])
def test_a_group_by_forgets_a_key_idle_for_the_retention_as_dagger(
    spark, broker, stencil, topic, tmp_path, minutes, after_idle
):
    """FLINK_RETENTION_IDLE_STATE_MINUTE=0.05 (3 s): a customer's running count starts again after 3 idle seconds;
    with 0 it goes on. The other aggregates run alongside, HAVING filters on them."""
    import time

    from testing.produce import consume_all, produce
    from testing.samples import message_class
    from tests.conftest import START, json_sink, run_job

    source, out = topic("retained-in"), topic("retained-out")
    Booking = message_class("dagger.examples.BookingLogMessage")

    def send(*orders: tuple[str, str, float]) -> None:
        values = []
        for number, customer, cash in orders:
            b = Booking(order_number=number, customer_id=customer, amount_paid_by_cash=cash)
            b.event_timestamp.FromDatetime(START)
            values.append(b.SerializeToString())
        produce(broker.bootstrap, source, ((None, v) for v in values))

    sql = (
        "SELECT customer_id, COUNT(*) AS n, SUM(amount_paid_by_cash) AS cash, AVG(amount_paid_by_cash) AS mean, "
        "MAX(order_number) AS last FROM data_stream_0 GROUP BY customer_id HAVING MIN(amount_paid_by_cash) > 0"
    )
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        FLINK_RETENTION_IDLE_STATE_MINUTE=minutes,
        **json_sink(broker, out),
    )
    send(("o1", "c0", 10), ("o2", "c0", 20), ("o3", "c1", 5), ("o4", "c0", 30), ("o5", "c2", 0))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    retained = minutes != "0"
    assert any("forgets a key after FLINK_RETENTION_IDLE_STATE_MINUTE" in n for n in manager.planned.notes) == retained
    first = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=2)]  # c2 fails HAVING
    last = {r["customer_id"]: r for r in first}  # one micro-batch: one row per key
    assert last["c0"] == {"customer_id": "c0", "n": 3, "cash": 60.0, "mean": 20.0, "last": "o4"}
    assert last["c1"] == {"customer_id": "c1", "n": 1, "cash": 5.0, "mean": 5.0, "last": "o3"}
    time.sleep(4)  # c0 idle for longer than 3 s
    send(("o6", "c0", 40))
    manager, query = run_job(spark, data, tmp_path / "cp")  # the same checkpoint: the state goes on
    assert query.exception() is None
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=3)]
    assert rows[-1]["customer_id"] == "c0" and rows[-1]["n"] == after_idle
    assert rows[-1]["last"] == "o6"
    assert rows[-1]["cash"] == (40.0 if retained else 100.0)


@pytest.mark.integration
def test_a_job_with_unbounded_state_says_so_when_it_starts(spark, broker, stencil, topic, tmp_path, caplog):
    from testing.produce import produce
    from testing.samples import bookings
    from tests.conftest import START, run_job

    source = topic("unbounded")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    sql = "SELECT customer_id, approx_count_distinct(order_number) AS n FROM data_stream_0 GROUP BY customer_id"
    with caplog.at_level("WARNING", logger="dagger"):
        _, query = run_job(spark, job(stencil, [kafka_stream(broker, source)], sql), tmp_path / "cp")
    assert query.exception() is None
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("state without bound")]
    assert warnings == [
        "state without bound: GROUP BY customer_id keeps a running result for every key forever (no window): group "
        "by a TUMBLE or HOP window as well to have the watermark drop old keys (Dagger drops a key's state after "
        "FLINK_RETENTION_IDLE_STATE_MINUTE=10 idle minutes; Spark has no such retention for these operators and "
        "keeps it)"
    ]


@pytest.mark.integration
@pytest.mark.parametrize(("minutes", "joined"), [(10, 11), pytest.param(0, 21, marks=pytest.mark.variant)])
def test_join_retention_decides_which_late_rows_still_join(spark, broker, stencil, topic, tmp_path, minutes, joined):
    import datetime as dt

    from testing.produce import consume_all, produce
    from testing.samples import message_class
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
    assert manager.counters.sinks["kafka"]["written"].value == joined
    assert sorted(json.loads(m.value())["order_number"] for m in rows) == sorted(f"order-{i}" for i in range(joined))


def test_validate_and_the_start_log_name_unbounded_state_with_daggers_retention(spark, broker, stencil, tmp_path):
    sql = "SELECT customer_id, COUNT(1) AS booking_count FROM data_stream_0 GROUP BY customer_id"
    path = tmp_path / "job.json"
    path.write_text(
        json.dumps(job(stencil, [kafka_stream(broker, "nothing-yet")], sql, FLINK_RETENTION_IDLE_STATE_MINUTE="30"))
    )
    done = validate_here(spark, str(path))
    assert done.returncode == 0, done.stderr
    assert "GROUP BY customer_id forgets a key after FLINK_RETENTION_IDLE_STATE_MINUTE=30 idle minutes" in done.stdout
    assert "state without bound" not in done.stdout
    distinct = "SELECT DISTINCT customer_id FROM data_stream_0"
    path.write_text(
        json.dumps(
            job(stencil, [kafka_stream(broker, "nothing-yet")], distinct, FLINK_RETENTION_IDLE_STATE_MINUTE="30")
        )
    )
    done = validate_here(spark, str(path))
    assert done.returncode == 0, done.stderr
    assert (
        "state without bound (Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE=30 idle minutes; "
        "Spark has no such retention for these operators and keeps it):\n  - SELECT DISTINCT keeps every distinct "
        "row forever"
    ) in done.stdout
    windowed = job(
        stencil,
        [kafka_stream(broker, "nothing-yet")],
        "SELECT customer_id, COUNT(1) AS n FROM data_stream_0 GROUP BY customer_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)",
    )
    path.write_text(json.dumps(windowed))
    done = validate_here(spark, str(path))
    assert done.returncode == 0, done.stderr
    assert "state without bound" not in done.stdout
