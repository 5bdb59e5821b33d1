"""gRPC external sources against a real gRPC server built from the descriptor set at run time."""

from __future__ import annotations

import pytest

from dagger.errors import DaggerConfigError
from tests.conftest import STAR, failing_run, plan_post, run_processed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def customers():
    from testing.grpc_lookup_server import CustomerLookupServer

    server = CustomerLookupServer().start()
    yield server
    server.stop()


def _grpc(server, **extra) -> dict:
    source = {
        "endpoint": "127.0.0.1",
        "service_port": str(server.port),
        "grpc_method_url": "dagger.examples.CustomerService/GetCustomer",
        "grpc_request_proto_schema": "dagger.examples.CustomerRequest",
        "grpc_response_proto_schema": "dagger.examples.CustomerReply",
        "request_pattern": "{'customer_id': '%s', 'fields': ['name']}",
        "request_variables": "customer_id",
        "headers": {"x-caller": "dagger"},
        "stream_timeout": "1000",
        "connect_timeout": "1000",
        "capacity": "8",
        "type": "dagger.examples.CustomerLogMessage",
        "output_mapping": {
            "name": {"path": "$.name"},
            "age": {"path": "$.age"},
            "event_timestamp": {"path": "$.joined"},
        },
    }
    source.update(extra)
    return source


SQL = (
    "SELECT order_number, CASE amount_paid_by_cash WHEN 10 THEN 'missing' WHEN 20 THEN 'slow' WHEN 30 THEN '' "
    "ELSE customer_id END AS customer_id, amount_paid_by_cash FROM data_stream_0"
)


def test_unary_calls_enrich_rows_typed_in_order_and_failures_pass_on(
    spark, broker, stencil, topic, tmp_path, customers
):
    # the job's descriptor set lacks the service's messages: grpc_stencil_url brings them for this source
    source = _grpc(customers, grpc_stencil_url=stencil.url("lookup.desc"))
    post = {"external_source": {"grpc": [source]}, "internal_source": [STAR]}
    manager, rows = run_processed(
        spark,
        broker,
        stencil,
        topic,
        tmp_path,
        sql=SQL,
        post=post,
        count=8,
        job_keys={"SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("bookings.desc")},
    )
    by_cash = {r["amount_paid_by_cash"]: r for r in rows}
    for cash in (10, 20, 30):  # NOT_FOUND, deadline exceeded, empty id (not called)
        assert (by_cash[cash]["name"], by_cash[cash]["age"]) == (None, None)
    for cash in (0, 40, 50, 60, 70):
        row = by_cash[cash]
        assert row["name"] == f"name-{row['customer_id']}" and row["age"] == len(row["customer_id"])
        assert row["event_timestamp"].startswith("2026-01-02T03:04:05")
    metrics = manager.counters.lookups["GRPC.0"].values()
    assert metrics["calls"] == 7 and metrics["success"] == 5 and metrics["empty_input"] == 1
    assert metrics["failures_code404"] == 1 and metrics["timeouts"] == 1
    assert customers.metadata.get("x-caller") == "dagger"


def test_fail_on_errors_names_the_status(spark, broker, stencil, topic, tmp_path, customers):
    post = {"external_source": {"grpc": [_grpc(customers, fail_on_errors=True)]}, "internal_source": [STAR]}
    error = failing_run(spark, broker, stencil, topic, tmp_path, post, count=3, sql=SQL)
    assert "failed with NOT_FOUND: no customer missing (fail_on_errors is true)" in error


def test_grpc_source_configs_are_checked(spark, broker, stencil, customers):
    def plan(source, urls="examples.desc"):
        return plan_post(
            spark,
            broker,
            stencil,
            {"external_source": {"grpc": [source]}, "internal_source": [STAR]},
            SCHEMA_REGISTRY_STENCIL_URLS=stencil.url(urls),
            SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES="0",
        )

    with pytest.raises(
        DaggerConfigError, match="takes dagger.examples.CustomerRequest and returns dagger.examples.CustomerReply"
    ):
        plan(_grpc(customers, grpc_response_proto_schema="dagger.examples.BookingLogKey"))
    with pytest.raises(DaggerConfigError, match="must be package.Service/Method"):
        plan(_grpc(customers, grpc_method_url="GetCustomer"))
    with pytest.raises(
        DaggerConfigError, match=r"grpc\[0\].grpc_stencil_url: cannot fetch descriptor set .*/nope.desc"
    ):
        plan(_grpc(customers, grpc_stencil_url=stencil.url("nope.desc")))
    with pytest.raises(
        DaggerConfigError,
        match=r"grpc\[0\].grpc_request_proto_schema: message 'dagger.examples.CustomerRequest' is not in the",
    ):
        plan(_grpc(customers), urls="bookings.desc")  # the service's messages are in neither set
    assert plan(_grpc(customers)).output_schema.names[:3] == ["name", "age", "event_timestamp"]


def test_retained_grpc_outputs_take_their_types_from_the_response_message_as_in_dagger(
    spark, broker, stencil, topic, tmp_path, customers
):
    """Dagger's own gRPC post-processor tests retain the response type with no `type`; its values are the
    response's typed values, so a SQLTransformer after the lookup does arithmetic on them. A path the response
    lacks stays VARIANT; an int64 (a JSON string in the printed reply) stays exact past 2^53."""
    source = _grpc(customers, retain_response_type=True, grpc_stencil_url=stencil.url("lookup.desc"))
    del source["type"]
    source["output_mapping"] = {
        "name": {"path": "$.name"},
        "age": {"path": "$.age"},
        "balance": {"path": "$.balance"},
        "points": {"path": "$.points"},
        "joined": {"path": "$.joined"},
        "tier": {"path": "$.labels.tier"},
    }
    post = {
        "external_source": {"grpc": [source]},
        "internal_source": [STAR],
        "transformers": [
            {
                "transformation_class": "SQLTransformer",
                "transformation_arguments": {
                    "sqlQuery": "SELECT customer_id, upper(name) AS name, age * 2 + 1 AS twice, balance / 2 AS half, "
                    "points - 9007199254740992 AS above, joined, tier FROM data_stream"
                },
            }
        ],
    }
    manager, rows = run_processed(
        spark,
        broker,
        stencil,
        topic,
        tmp_path,
        sql="SELECT customer_id, rowtime FROM data_stream_0",
        post=post,
        count=5,
        job_keys={"SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("bookings.desc")},
    )
    types = {f.name: f.dataType.simpleString() for f in manager.planned.output_schema.fields}
    assert types == {
        "customer_id": "string",
        "name": "string",
        "twice": "int",
        "half": "double",
        "above": "bigint",
        "joined": "timestamp",
        "tier": "variant",  # a map entry's path: JSON's own type
    }
    for row in rows:
        n = len(row["customer_id"])
        assert row["name"] == f"NAME-{row['customer_id']}".upper()
        assert (row["twice"], row["half"], row["above"]) == (2 * n + 1, 12.5 * n / 2, n)
        assert row["joined"].startswith("2026-01-02T03:04:05") and row["tier"] == "gold"
