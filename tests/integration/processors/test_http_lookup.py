"""HTTP external sources against a real local HTTP server (aiohttp) with controllable latency and failures."""

from __future__ import annotations

import pytest

from dagger.errors import DaggerConfigError
from testing.lookup_server import LookupServer
from tests.conftest import STAR, failing_run, plan_post, run_processed

pytestmark = pytest.mark.integration

# amount_paid_by_cash is 10 * i: pick special customer ids for some rows
IDS_SQL = (
    "SELECT order_number, CASE amount_paid_by_cash WHEN 10 THEN 'missing' WHEN 20 THEN 'boom' WHEN 30 THEN '' "
    "WHEN 40 THEN 'slow' ELSE customer_id END AS customer_id, amount_paid_by_cash, rowtime FROM data_stream_0"
)


@pytest.fixture(scope="module")
def lookup():
    with LookupServer() as server:
        yield server


def _http(server, **extra) -> dict:
    source = {
        "endpoint": f"{server.url}/customers/",
        "verb": "get",
        "request_pattern": "%s",
        "request_variables": "customer_id",
        "stream_timeout": "1500",
        "connect_timeout": "1000",
        "capacity": "10",
        "type": "dagger.examples.CustomerLogMessage",
        "output_mapping": {
            "name": {"path": "$.name"},
            "age": {"path": "$.tier"},
            "event_timestamp": {"path": "$.since"},
        },
    }
    source.update(extra)
    return source


def _post(*sources, internal=(STAR,), transformers=()) -> dict:
    return {
        "external_source": {"http": list(sources)},
        "internal_source": list(internal),
        "transformers": list(transformers),
    }


def test_get_lookups_enrich_every_row_in_order_with_typed_outputs(spark, broker, stencil, topic, tmp_path, lookup):
    manager, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=_post(_http(lookup)), count=20)
    assert len(rows) == 20
    for row in rows:
        assert list(row)[:3] == ["name", "age", "event_timestamp"]  # external outputs first, then the SQL columns
        assert row["name"] == f"name-{row['customer_id']}"  # each answer landed on its own row
        assert row["age"] == len(row["customer_id"])
        assert row["event_timestamp"].startswith("2026-01-02T03:04:05")
    metrics = manager.counters.lookups["HTTP.0"].values()
    assert metrics["calls"] == 20 and metrics["success"] == 20
    assert sum(manager.counters.lookups["HTTP.0"].histogram().values()) == 20


def test_failures_timeouts_and_empty_inputs_pass_rows_on_with_null_enrichment(
    spark, broker, stencil, topic, tmp_path, lookup
):
    calls_before = lookup.calls["/customers/"]
    manager, rows = run_processed(
        spark, broker, stencil, topic, tmp_path, sql=IDS_SQL, post=_post(_http(lookup, stream_timeout="800")), count=8
    )
    by_cash = {r["amount_paid_by_cash"]: r for r in rows}
    for cash in (10, 20, 30, 40):  # 404, 500, empty id (not called), timeout
        assert by_cash[cash]["name"] is None and by_cash[cash]["age"] is None, by_cash[cash]
    assert by_cash[50]["name"] == "name-c0"
    metrics = manager.counters.lookups["HTTP.0"].values()
    assert metrics["failures_code404"] == 1 and metrics["failures_code5XX"] == 1
    assert metrics["timeouts"] == 1 and metrics["empty_input"] == 1
    assert metrics["calls"] == 7 and metrics["success"] == 4
    assert lookup.calls["/customers/"] == calls_before  # the empty id never reached the server


def test_fail_on_errors_fails_the_batch_naming_the_call(spark, broker, stencil, topic, tmp_path, lookup):
    post = _post(_http(lookup, fail_on_errors=True))
    error = failing_run(spark, broker, stencil, topic, tmp_path, post, count=4, sql=IDS_SQL)
    assert "HTTP.0 (GET " in error and "/customers/missing) answered 404" in error and "fail_on_errors is true" in error


def test_post_with_body_template_dynamic_headers_and_untyped_response(spark, broker, stencil, topic, tmp_path, lookup):
    source = {
        "endpoint": f"{lookup.url}/score",
        "verb": "POST",
        "request_pattern": '{"order": "%s", "cash": %s, "pct": "100%%"}',
        "request_variables": "order_number,amount_paid_by_cash",
        "headers": {"X-Static": "yes"},
        "header_pattern": '{"X-Customer": "%s"}',
        "header_variables": "customer_id",
        "stream_timeout": "2000",
        "connect_timeout": "1000",
        "capacity": "4",
        "retain_response_type": True,
        "output_mapping": {"score": {"path": "$.score"}, "echo": {"path": "$.body"}, "method": {"path": "$.method"}},
    }
    _, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=_post(source), count=3)
    row = next(r for r in rows if r["order_number"] == "order-2")
    assert row["echo"] == {"order": "order-2", "cash": 20, "pct": "100%"}  # untyped: the answer's own object
    assert row["method"] == "POST" and row["score"] == len('{"order": "order-2", "cash": 20, "pct": "100%"}')
    headers = lookup.headers["/score"]
    assert headers["X-Static"] == "yes" and headers["X-Customer"].startswith("c")

    source["verb"] = "put"
    _, rows = run_processed(spark, broker, stencil, topic, tmp_path / "put", post=_post(source), count=1)
    assert rows[0]["method"] == "PUT"


def test_untyped_answers_keep_their_own_json_types_as_in_dagger(spark, broker, stencil, topic, tmp_path, lookup):
    """retain_response_type and no `type`: not the sink's message, not text: a number stays a number."""
    mapping = {"balance": "$.balance", "tier": "$.tier", "name": "$.name", "address": "$.address"}
    source = _http(lookup, output_mapping={k: {"path": v} for k, v in mapping.items()}, retain_response_type=True)
    del source["type"]
    post = _post(source)
    sql = "SELECT order_number, concat('id-', order_number) AS customer_id FROM data_stream_0"  # all answered
    manager, rows = run_processed(spark, broker, stencil, topic, tmp_path, sql=sql, post=post, count=3)
    types = {f.name: f.dataType.simpleString() for f in manager.planned.output_schema.fields}
    assert types["balance"] == types["address"] == "variant"
    for row in rows:
        n = len(row["customer_id"])
        assert row["balance"] == n + 0.25 and isinstance(row["balance"], float)
        assert row["tier"] == n and isinstance(row["tier"], int)
        assert row["name"] == f"name-{row['customer_id']}"
        assert row["address"] == {"city": f"city-{row['customer_id']}"}
    assert manager.counters.lookups["HTTP.0"].values()["success"] == 3


def test_retries_and_the_response_cache(spark, broker, stencil, topic, tmp_path, lookup):
    flaky_sql = (
        "SELECT order_number, concat('flaky-', customer_id, '-', order_number) AS customer_id FROM data_stream_0"
    )
    manager, rows = run_processed(
        spark,
        broker,
        stencil,
        topic,
        tmp_path,
        sql=flaky_sql,
        count=3,
        post=_post(_http(lookup, retries=2, retry_backoff_ms=10)),
    )
    assert all(r["name"] == f"name-{r['customer_id']}" for r in rows)  # 503, 503, then 200
    assert manager.counters.lookups["HTTP.0"].values()["retries"] == 6

    before = sum(n for path, n in lookup.calls.items() if path.startswith("/customers/c"))
    manager, rows = run_processed(
        spark,
        broker,
        stencil,
        topic,
        tmp_path / "cache",
        count=40,
        post=_post(_http(lookup, cache_ttl_seconds=600, capacity="1")),
    )
    assert all(r["name"] == f"name-{r['customer_id']}" for r in rows)
    metrics = manager.counters.lookups["HTTP.0"].values()
    server_calls = sum(n for path, n in lookup.calls.items() if path.startswith("/customers/c")) - before
    assert metrics["cache_hits"] > 0 and metrics["calls"] == server_calls < 40
    assert metrics["cache_hits"] + metrics["calls"] == 40


def test_rate_limit_spaces_the_calls_of_a_task(spark, broker, stencil, topic, tmp_path, lookup):
    lookup.arrivals.clear()
    manager, rows = run_processed(
        spark, broker, stencil, topic, tmp_path, count=10, post=_post(_http(lookup, rate_limit_per_second=20))
    )
    assert len(rows) == 10 and manager.counters.lookups["HTTP.0"].values()["calls"] == 10
    # one Kafka partition, one task: 10 calls at 20/s cannot arrive faster than 9 gaps of 50 ms
    assert lookup.arrivals[-1] - lookup.arrivals[0] >= 9 / 20 * 0.9


def test_a_mapped_path_missing_from_the_answer_fails_only_with_fail_on_errors(
    spark, broker, stencil, topic, tmp_path, lookup
):
    mapping = {"name": {"path": "$.name"}, "age": {"path": "$.nickname"}}
    post = _post(_http(lookup, output_mapping=mapping, fail_on_errors="true"))
    error = failing_run(spark, broker, stencil, topic, tmp_path / "failing", post, count=2)
    assert "output_mapping.age path $.nickname finds nothing in the response" in error
    assert "(fail_on_errors is true)" in error
    # as in Dagger, fail_on_errors false makes it a counted outcome: the row passes on, unenriched
    manager, rows = run_processed(
        spark, broker, stencil, topic, tmp_path, post=_post(_http(lookup, output_mapping=mapping)), count=4
    )
    assert len(rows) == 4 and all(r.get("name") is None and r.get("age") is None for r in rows)
    metrics = manager.counters.lookups["HTTP.0"].values()
    assert (metrics["success"], metrics["invalid_response"]) == (4, 4)


# rows 1 and 2 get answers strict JSON cannot read: unquoted keys and values (json-smart reads them), and HTML
ODD_SQL = (
    "SELECT order_number, CASE amount_paid_by_cash WHEN 10 THEN 'lenient' WHEN 20 THEN 'html' ELSE customer_id "
    "END AS customer_id, amount_paid_by_cash, rowtime FROM data_stream_0"
)


def test_answers_dagger_reads_leniently_are_read_and_a_body_that_is_no_json_passes_the_row_on(
    spark, broker, stencil, topic, tmp_path, lookup, caplog
):
    mapping = {"name": {"path": "$.name"}, "age": {"path": "$.tier"}}
    manager, rows = run_processed(
        spark, broker, stencil, topic, tmp_path, sql=ODD_SQL, post=_post(_http(lookup, output_mapping=mapping)), count=5
    )
    by_id = {r["customer_id"]: r for r in rows}
    assert len(rows) == 5
    assert (by_id["lenient"]["name"], by_id["lenient"]["age"]) == ("name-lenient", 7)  # read as Dagger reads it
    assert by_id["html"].get("name") is None  # not JSON at all: passed on unenriched, counted
    assert all(by_id[f"c{i}"]["name"] == f"name-c{i}" for i in (0, 3, 4))
    metrics = manager.counters.lookups["HTTP.0"].values()
    assert (metrics["success"], metrics["invalid_response"]) == (5, 1)
    failing = _post(_http(lookup, output_mapping=mapping, fail_on_errors="true"))
    error = failing_run(spark, broker, stencil, topic, tmp_path / "failing", failing, sql=ODD_SQL)
    assert "answered 200 with a body that is not JSON: b'<html>maintenance</html>' (fail_on_errors is true)" in error


def test_http_source_configs_are_checked_before_anything_runs(spark, broker, stencil, lookup):
    def plan(source):
        return plan_post(spark, broker, stencil, _post(source))

    with pytest.raises(
        DaggerConfigError,
        match=r"http\[0\].request_variables: driver not in the SQL output; columns: order_number, customer_id",
    ):
        plan(_http(lookup, request_variables="driver"))
    with pytest.raises(DaggerConfigError, match=r"request_pattern: pattern '%s/%s' does not take its 1 variable"):
        plan(_http(lookup, request_pattern="%s/%s"))
    with pytest.raises(
        DaggerConfigError, match=r"output_mapping: 'nickname' is not a field of dagger.examples.CustomerLogMessage"
    ):
        plan(_http(lookup, output_mapping={"nickname": {"path": "$.name"}}))
    with pytest.raises(DaggerConfigError, match=r"output_mapping.name.path '\$\[' is not JSONPath"):
        plan(_http(lookup, output_mapping={"name": {"path": "$["}}))
    with pytest.raises(DaggerConfigError, match="no message types the response; set `type`"):
        plan(_http(lookup, type=None))
    with pytest.raises(DaggerConfigError, match="header_pattern must be a JSON object template"):
        plan(_http(lookup, header_pattern="X-A: %s", header_variables="customer_id"))
    planned = plan(_http(lookup))
    assert planned.output_schema.names[:3] == ["name", "age", "event_timestamp"]
    assert dict((f.name, f.dataType.simpleString()) for f in planned.output_schema.fields)["age"] == "int"


def test_a_sql_transformer_windows_lookup_enriched_rows_of_a_stream(spark, broker, stencil, topic, tmp_path, lookup):
    """Dagger's use of the SQLTransformer: aggregate over what a lookup added, by event time. The lookup's rows
    come back from the executors' Python without the source's watermark; windowing them must not define a
    second one (Spark refuses it: "Redefining watermark is disallowed")."""
    import json

    from testing.produce import consume_all, produce
    from testing.samples import bookings
    from tests.conftest import START, job, kafka_stream, run_job

    source, out = topic("lookup-window-src"), topic("lookup-window-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(30, START, step_seconds=60)))
    post = {
        "external_source": {"http": [lookup.customers_lookup("customer_id", {"customer_name": "$.name"})]},
        "internal_source": [STAR],
        "transformers": [
            {
                "transformation_class": "SQLTransformer",
                "transformation_arguments": {
                    "sqlQuery": "SELECT customer_id, COUNT(1) AS bookings, TUMBLE_END(rowtime, INTERVAL '10' MINUTE) "
                    "AS window_end FROM data_stream GROUP BY customer_id, TUMBLE(rowtime, INTERVAL '10' MINUTE)"
                },
            }
        ],
    }
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT customer_id, rowtime FROM data_stream_0",
        SINK_TYPE="kafka",
        SINK_KAFKA_BROKERS=broker.bootstrap,
        SINK_KAFKA_TOPIC=out,
        SINK_KAFKA_DATA_TYPE="JSON",
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=10)]
    # bookings a minute apart, customer c{i % 5}: two per customer in each of the two windows the watermark
    # (the last booking at 10:29 less the source's 10 s) closes
    assert sorted((r["window_end"], r["customer_id"], r["bookings"]) for r in rows) == sorted(
        (end, f"c{c}", 2) for end in ("2026-11-22T10:10:00.000000Z", "2026-11-22T10:20:00.000000Z") for c in range(5)
    )


def test_retained_http_outputs_take_the_sink_messages_field_types_and_stay_variant_otherwise(
    spark, broker, stencil, lookup
):
    """Without `type`, a retained output named as a field of the Kafka sink's message is written as that field:
    its type is known when the job is planned (Dagger types the row after a SQLTransformer by the sink message).
    Other outputs keep their values' own JSON types."""
    source = _http(lookup, retain_response_type="true")
    del source["type"]
    source["output_mapping"] = {"name": {"path": "$.name"}, "age": {"path": "$.tier"}, "tier": {"path": "$.tier"}}
    planned = plan_post(
        spark,
        broker,
        stencil,
        _post(source),
        SINK_TYPE="kafka",
        SINK_KAFKA_BROKERS=broker.bootstrap,
        SINK_KAFKA_TOPIC="unused",
        SINK_KAFKA_PROTO_MESSAGE="dagger.examples.CustomerLogMessage",
    )
    types = {f.name: f.dataType.simpleString() for f in planned.output_schema.fields}
    assert (types["name"], types["age"], types["tier"]) == ("string", "int", "variant")
