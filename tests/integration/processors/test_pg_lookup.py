"""Postgres external sources against a real PostgreSQL 15 started by a fixture."""

from __future__ import annotations

import pytest

from dagger.errors import DaggerConfigError
from tests.conftest import STAR, failing_run, plan_post, run_processed

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
    manager, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=post, count=10)
    by_customer = {}
    for row in rows:
        by_customer.setdefault(row["customer_id"], set()).add((row["email"], row["age"], row["event_timestamp"]))
    assert by_customer["c0"] == {("c0@example.com", 30, "2026-01-02T03:04:05.000000Z")}
    assert by_customer["c2"] == {("c2@example.com", 32, None)}
    assert by_customer["c3"] == {(None, None, None)}  # two rows: invalid_configuration, passed on unenriched
    assert by_customer["c4"] == {(None, None, None)}  # no row: no enrichment
    metrics = manager.counters.lookups["PG.0"].values()
    assert metrics["calls"] == 10 and metrics["invalid_configuration"] == 2 and metrics["success"] == 8


def test_fail_on_errors_fails_on_too_many_rows(spark, broker, stencil, topic, tmp_path, customers):
    post = {"external_source": {"pg": [_pg(customers, fail_on_errors=True)]}, "internal_source": [STAR]}
    error = failing_run(spark, broker, stencil, topic, tmp_path, post)
    assert "where id = 'c3') returned 2 rows; a lookup query must return at most one" in error


def test_a_mapped_result_column_must_exist(spark, broker, stencil, topic, tmp_path, customers):
    post = {"external_source": {"pg": [_pg(customers, output_mapping={"email": "mail"})]}, "internal_source": [STAR]}
    error = failing_run(spark, broker, stencil, topic, tmp_path, post, count=1)
    assert "output_mapping.email names result column 'mail', which the query does not return" in error


def test_pg_source_configs_are_checked(spark, broker, stencil, customers):
    def plan(source):
        return plan_post(spark, broker, stencil, {"external_source": {"pg": [source]}, "internal_source": [STAR]})

    with pytest.raises(DaggerConfigError, match=r"pg\[0\].query_variables: customer not in the SQL output"):
        plan(_pg(customers, query_variables="customer"))
    with pytest.raises(DaggerConfigError, match=r"capacity must be > 0 \(it is also the pool size\)"):
        plan(_pg(customers, capacity="0"))
    assert plan(_pg(customers)).output_schema.names[:3] == ["email", "age", "event_timestamp"]
