"""Elasticsearch external sources against osmem-server (a real server speaking the Elasticsearch document API)."""

from __future__ import annotations

import pytest
import requests

from tests.conftest import STAR, failing_run, run_processed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def customers(elasticsearch):
    index = "customers"
    for i in range(4):  # c4 is not indexed: its lookup answers 404
        answer = requests.put(
            f"{elasticsearch.url}/{index}/_doc/c{i}?refresh=true",
            json={"name": f"Customer {i}", "tier": i * 10},
            timeout=10,
        )
        assert answer.status_code in (200, 201), answer.text
    return elasticsearch


def _es(server, **extra) -> dict:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    source = {
        "host": f"{host},localhost",  # comma-separated hosts on the same port, taken in turn
        "port": port,
        "user": "reader",
        "password": "secret",
        "endpoint_pattern": "/customers/_doc/%s",
        "endpoint_variables": "customer_id",
        "connect_timeout": "1000",
        "socket_timeout": "2000",
        "retry_timeout": "2000",
        "stream_timeout": "3000",
        "capacity": "8",
        "type": "dagger.examples.CustomerLogMessage",
        "output_mapping": {"name": {"path": "$._source.name"}, "age": {"path": "$._source.tier"}},
    }
    source.update(extra)
    return source


def test_document_gets_enrich_rows_in_order_fail_over_dead_hosts_and_missing_documents_pass_on(
    spark, broker, stencil, topic, tmp_path, customers
):
    host, port = customers.url.removeprefix("http://").rsplit(":", 1)
    # 127.0.0.2 refuses connections on that port: its rows (every other one) fail over to the next host
    source = _es(customers, metricId="customers", host=f"127.0.0.2,{host}")
    post = {"external_source": {"es": [source]}, "internal_source": [STAR]}
    manager, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=post, count=15)
    for row in rows:
        number = int(row["customer_id"][1:])
        if number == 4:
            assert row["name"] is None and row["age"] is None  # 404: null enrichment (fail_on_errors false)
        else:
            assert (row["name"], row["age"]) == (f"Customer {number}", number * 10)
    metrics = manager.counters.lookups["ES.customers"].values()
    assert metrics["success"] == 12 and metrics["failures_code404"] == 3
    assert metrics["failures_other"] == 8 and metrics["retries"] == 8 and metrics["calls"] == 15 + 8


def test_fail_on_errors_fails_on_a_missing_document(spark, broker, stencil, topic, tmp_path, customers):
    post = {"external_source": {"es": [_es(customers, fail_on_errors=True)]}, "internal_source": [STAR]}
    error = failing_run(spark, broker, stencil, topic, tmp_path, post)
    assert "ES.0 (GET " in error and "/customers/_doc/c4) answered 404" in error


def test_retry_timeout_bounds_failing_over_to_the_next_host(customers):
    """The caller alone (no Spark): a dead first host is skipped while retry_timeout allows, never after."""
    from dagger.processors.external.http import HttpCaller, build_es_requests

    host, port = customers.url.removeprefix("http://").rsplit(":", 1)
    spec = {
        "name": "ES.0",
        "kind": "es",
        "hosts": [f"http://127.0.0.2:{port}", f"http://{host}:{port}"],
        "endpoint_pattern": "/customers/_doc/%s",
        "endpoint_variables": ["customer_id"],
        "headers": {},
        "stream_timeout": 3000,
        "connect_timeout": 1000,
        "socket_timeout": 2000,
        "capacity": 4,
        "fail_on_errors": False,
        "cache_ttl_seconds": 0,
        "retries": 0,
        "retry_backoff_ms": 10,
        "rate_limit_per_second": 0,
    }

    def lookup(retry_timeout: int) -> tuple[dict, dict]:
        answers: dict[int, dict] = {}
        requests_ = build_es_requests(spec, {"customer_id": ["c1", "c2"]}, 2)  # c1 → dead host, c2 → live host
        caller = HttpCaller({**spec, "retry_timeout": retry_timeout})
        counts, _ = caller.call_all(requests_, lambda row, answer: answers.__setitem__(row, answer))
        return answers, counts

    answers, counts = lookup(2000)
    assert answers[0]["_source"]["name"] == "Customer 1" and answers[1]["_source"]["name"] == "Customer 2"
    assert (counts["retries"], counts["failures_other"], counts["calls"]) == (1, 1, 3)
    answers, counts = lookup(0)
    assert 0 not in answers and answers[1]["_source"]["name"] == "Customer 2"
    assert (counts["retries"], counts["failures_other"], counts["calls"]) == (0, 1, 2)
