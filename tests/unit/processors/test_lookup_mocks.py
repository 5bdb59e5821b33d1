"""A ``dagger test`` case's lookups answered from its MOCKS by the production caller's own answer handling: the
answer typed into the row, a 404 counted and passed on, retries counted, and an unmocked request failing with
the request shown (whatever ``fail_on_errors`` says)."""

from __future__ import annotations

import pytest

from dagger.processors.external.base import LookupError_
from dagger.processors.external.mocks import mock_caller


def spec(kind: str, mocks: list[dict], **extra) -> dict:
    return {
        "name": f"{kind.upper()}.0",
        "kind": kind,
        "fail_on_errors": False,
        "retries": 2,
        "retry_backoff_ms": 1,
        "cache_ttl_seconds": 0,
        "capacity": 4,
        "mocks": mocks,
        **extra,
    }


def test_http_requests_are_answered_from_the_mocks_and_counted_as_calls():
    mocks = [
        {"REQUEST": "GET http://c/customers/1", "RESPONSE": {"name": "Ayu"}},
        {"REQUEST": "get  http://c/customers/2", "STATUS": 404, "RESPONSE": {"error": "none"}},
        {"REQUEST": "POST http://c/search", "BODY": {"b": 2, "a": 1}, "RESPONSE": {"hits": 3}},
        {"REQUEST": "GET http://c/flaky", "STATUS": 503},
    ]
    caller = mock_caller(spec("http", mocks))
    answers = {}
    requests = [
        ("GET", "http://c/customers/1", None, ()),
        ("GET", "http://c/customers/2", None, ()),
        None,
        ("POST", "http://c/search", '{"a": 1, "b": 2}', ()),
        ("GET", "http://c/flaky", None, ()),
    ]
    counts, latencies = caller.call_all(requests, lambda row, answer: answers.__setitem__(row, answer))
    assert answers == {0: {"name": "Ayu"}, 3: {"hits": 3}}  # the 404 and the 503s pass their rows on unenriched
    assert counts["calls"] == 6 and counts["success"] == 2 and counts["empty_input"] == 1
    assert counts["failures_code404"] == 1 and counts["failures_code5XX"] == 3 and counts["retries"] == 2
    assert len(latencies) == 6


def test_an_unmocked_http_request_fails_even_without_fail_on_errors():
    caller = mock_caller(spec("http", [{"REQUEST": "GET http://c/customers/1", "RESPONSE": {}}]))
    with pytest.raises(LookupError_, match=r"HTTP\.0: no mock answers POST http://c/x with body \{\"q\": 1\}"):
        caller.call_all([("POST", "http://c/x", '{"q": 1}', ())], lambda row, answer: None)


def test_postgres_queries_are_answered_with_their_rows():
    mocks = [
        {"QUERY": "select name from customers where id = 'c-1'", "RESPONSE": [{"name": "Ayu"}]},
        {"QUERY": "select name from customers where id = 'c-2'", "RESPONSE": []},
        {"QUERY": "select name from customers where id = 'c-3'", "RESPONSE": [{"name": "a"}, {"name": "b"}]},
    ]
    caller = mock_caller(spec("pg", mocks, stream_timeout=1000))
    answers = {}
    queries = [f"select name from customers  where id = 'c-{i}'" for i in (1, 2, 3)]
    counts, _ = caller.call_all(queries, lambda row, answer: answers.__setitem__(row, answer))
    caller.close()
    assert answers == {0: {"name": "Ayu"}, 1: {}, 2: None}  # two rows: invalid_configuration, passed on
    assert counts["success"] == 2 and counts["invalid_configuration"] == 1
    unmocked = mock_caller(spec("pg", mocks, stream_timeout=1000))
    with pytest.raises(LookupError_, match="PG.0: no mock answers the query select 1"):
        unmocked.call_all(["select 1"], lambda row, answer: None)
    unmocked.close()


def test_grpc_calls_are_answered_as_messages_or_fail_with_a_status():
    import base64
    from pathlib import Path

    from tests.conftest import ROOT

    descriptors = base64.b64encode(Path(ROOT / "descriptors" / "lookup.desc").read_bytes()).decode()
    method = "dagger.examples.CustomerService/GetCustomer"
    mocks = [
        {"REQUEST": method, "BODY": {"customer_id": "c-1"}, "RESPONSE": {"name": "Ayu", "points": "7"}},
        {"REQUEST": method, "BODY": {"customerId": "c-2"}, "STATUS": "NOT_FOUND"},
    ]
    grpc_spec = spec(
        "grpc",
        mocks,
        stream_timeout=1000,
        method=method,
        request_message="dagger.examples.CustomerRequest",
        response_message="dagger.examples.CustomerReply",
        descriptor_set_b64=descriptors,
        headers={},
    )
    caller = mock_caller(grpc_spec)
    answers = {}
    requests = ['{"customer_id": "c-1"}', '{"customer_id": "c-2"}']
    counts, _ = caller.call_all(requests, lambda row, answer: answers.__setitem__(row, answer))
    caller.close()
    assert answers[0]["name"] == "Ayu" and answers[0]["points"] == "7" and answers[0]["age"] == 0
    assert answers[1] is None and counts["failures_code404"] == 1 and counts["success"] == 1
    unmocked = mock_caller(grpc_spec)
    with pytest.raises(
        LookupError_,
        match=r'no mock answers dagger.examples.CustomerService/GetCustomer with body \{"customer_id": "c-3"\}',
    ):
        unmocked.call_all(['{"customer_id": "c-3"}'], lambda row, answer: None)
    unmocked.close()
