"""Postgres external sources against a real PostgreSQL 15 started by a fixture."""

from __future__ import annotations

import json

import pytest

from dagger.errors import DaggerConfigError
from tests.test_processors import STAR, _run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def customers(postgres):
    postgres.execute(
        "DROP TABLE IF EXISTS customers; CREATE TABLE customers (id text, email text, age int, joined timestamptz);"
        "INSERT INTO customers VALUES ('c0', 'c0@example.com', 30, '2026-01-02 03:04:05+00'),"
        "('c1', 'c1@example.com', 31, '2026-01-02 03:04:05+00'), ('c2', 'c2@example.com', 32, NULL),"
        "('c3', 'first@example.com', 33, NULL), ('c3', 'second@example.com', 34, NULL);"
    )
    return postgres


def _pg(server, **extra) -> dict:
    source = {
        "host": server.host,
        "port": str(server.port),
        "user": server.user,
        "password": "unused",
        "database": "postgres",
        "query_pattern": "select email, age, joined from customers where id = '%s'",
        "query_variables": "customer_id",
        "stream_timeout": "3000",
        "connect_timeout": "3000",
        "idle_timeout": "60000",
        "capacity": "4",
        "type": "dagger.examples.CustomerLogMessage",
        "output_mapping": {"email": "email", "age": "age", "event_timestamp": "joined"},
    }
    source.update(extra)
    return source


def test_one_query_per_row_with_typed_columns_no_row_and_too_many_rows(
    spark, broker, stencil, topic, tmp_path, customers
):
    post = {"external_source": {"pg": [_pg(customers)]}, "internal_source": [STAR]}
    manager, rows = _run(spark, broker, stencil, topic, tmp_path, post=post, count=10)
    by_customer = {}
    for row in rows:
        by_customer.setdefault(row["customer_id"], set()).add((row["email"], row["age"], row["event_timestamp"]))
    assert by_customer["c0"] == {("c0@example.com", 30, "2026-01-02T03:04:05.000000Z")}
    assert by_customer["c2"] == {("c2@example.com", 32, None)}
    assert by_customer["c3"] == {(None, None, None)}  # two rows: invalid_configuration, passed on unenriched
    assert by_customer["c4"] == {(None, None, None)}  # no row: no enrichment
    metrics = manager.lookup_metrics["PG.0"].values()
    assert metrics["calls"] == 10 and metrics["invalid_configuration"] == 2 and metrics["success"] == 8


def test_fail_on_errors_fails_on_too_many_rows(spark, broker, stencil, topic, tmp_path, customers):
    from dagger.config import load_config
    from dagger.devtools.produce import produce
    from dagger.devtools.samples import bookings
    from dagger.stream_manager import StreamManager
    from tests.conftest import START, job, kafka_stream
    from tests.test_processors import _json_sink

    source, out = topic("pg-fail"), topic("pg-fail-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    post = {"external_source": {"pg": [_pg(customers, fail_on_errors=True)]}, "internal_source": [STAR]}
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_ENDING_OFFSETS="latest")],
        "SELECT order_number, customer_id FROM data_stream_0",
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
        **_json_sink(broker, out),
    )
    run = StreamManager(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), spark=spark).start()
    run.awaitTermination(120)
    error = str(run.exception())
    assert "where id = 'c3') returned 2 rows; a lookup query must return at most one" in error


def test_a_mapped_result_column_must_exist(spark, broker, stencil, topic, tmp_path, customers):
    from dagger.config import load_config
    from dagger.devtools.produce import produce
    from dagger.devtools.samples import bookings
    from dagger.stream_manager import StreamManager
    from tests.conftest import START, job, kafka_stream
    from tests.test_processors import _json_sink

    source, out = topic("pg-col"), topic("pg-col-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(1, START)))
    post = {"external_source": {"pg": [_pg(customers, output_mapping={"email": "mail"})]}, "internal_source": [STAR]}
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_ENDING_OFFSETS="latest")],
        "SELECT order_number, customer_id FROM data_stream_0",
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
        **_json_sink(broker, out),
    )
    run = StreamManager(load_config(data=data), checkpoint_dir=str(tmp_path / "cp"), spark=spark).start()
    run.awaitTermination(120)
    assert "output_mapping.email names result column 'mail', which the query does not return" in str(run.exception())


def test_pg_source_configs_are_checked(spark, broker, stencil, customers):
    from dagger.config import load_config
    from dagger.stream_manager import StreamManager
    from tests.conftest import job, kafka_stream

    def plan(source):
        data = job(
            stencil,
            [kafka_stream(broker, "never-created")],
            "SELECT order_number, customer_id FROM data_stream_0",
            PROCESSOR_POSTPROCESSOR_ENABLE="true",
            PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps({"external_source": {"pg": [source]}, "internal_source": [STAR]}),
        )
        return StreamManager(load_config(data=data), spark=spark).plan()

    with pytest.raises(DaggerConfigError, match=r"pg\[0\].query_variables: customer not in the SQL output"):
        plan(_pg(customers, query_variables="customer"))
    with pytest.raises(DaggerConfigError, match=r"capacity must be > 0 \(it is also the pool size\)"):
        plan(_pg(customers, capacity="0"))
    assert plan(_pg(customers)).output_schema.names[:3] == ["email", "age", "event_timestamp"]
