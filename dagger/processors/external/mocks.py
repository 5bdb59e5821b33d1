"""The lookups of a ``dagger test`` case answered from its ``MOCKS`` (runs on the executors, in the lookup's
task): the request is built, and the answer typed, counted, retried and checked exactly as in production; only
the transport is replaced.

* HTTP and Elasticsearch: a mock's ``REQUEST`` is ``"<METHOD> <url>"`` as the job sends it (the endpoint with
  its query for a GET; ``BODY`` for a POST or PUT, compared as JSON when it parses); ``STATUS`` (200) and
  ``RESPONSE`` (the body, JSON) are the answer.
* Postgres: ``QUERY`` is the query as the job sends it (its variables substituted); ``RESPONSE`` the result
  rows (a list of objects, ``[]`` for none).
* gRPC: ``REQUEST`` is the method (``package.Service/Method``) and ``BODY`` the request message in its JSON
  mapping (compared as messages, so field names and number forms may differ); ``RESPONSE`` the reply message,
  or ``STATUS`` a gRPC status name (``NOT_FOUND``, ``UNAVAILABLE`` ...) that the call fails with.

A request no mock answers fails the case, the request shown, whatever ``fail_on_errors`` says: a test never
calls out.
"""

from __future__ import annotations

import base64
import collections
import heapq
import json
from typing import Any

from dagger.processors.external.base import AsyncCaller, LookupError_, response_cache
from dagger.processors.external.grpc import GrpcCaller
from dagger.processors.external.http import HttpCaller
from dagger.processors.external.postgres import PgCaller


def mock_caller(spec: dict[str, Any]) -> Any:
    """The caller of ``spec``'s kind that answers from ``spec["mocks"]``."""
    kind = spec["kind"]
    if kind == "pg":
        return MockPgCaller(spec)
    if kind in ("http", "es"):
        return MockHttpCaller(spec)
    if kind == "grpc":
        return MockGrpcCaller(spec)
    raise LookupError_(f"{spec['name']}: dagger test cannot answer {kind} lookups from MOCKS")


def _json_key(body: Any) -> str | None:
    """A body in a form two equal JSON documents share (text that is not JSON: as it is)."""
    if body is None:
        return None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            return body
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _http_key(request: str, body: Any) -> tuple[str, str, str | None]:
    method, _, url = request.strip().partition(" ")
    return method.upper(), url.strip(), _json_key(body)


class MockHttpCaller(HttpCaller):
    """An HTTP (or Elasticsearch) lookup's calls answered from the case's mocks, one after the other."""

    def __init__(self, spec: dict[str, Any]):  # noqa: D107 - no pycurl: nothing is sent
        self.spec = spec
        self.cache = response_cache(spec)
        self.next_slot = 0.0
        self._headers: dict[tuple, list[str]] = {}
        self.free: list[Any] = []
        self.answers = {_http_key(m["REQUEST"], m.get("BODY")): m for m in spec["mocks"] if m.get("REQUEST")}

    def release(self) -> None:
        """Nothing was opened."""

    def _run(self, waiting: collections.deque, fresh: Any, done: Any, counts: dict, latencies: list) -> None:
        later: list[tuple[float, int, Any]] = []  # retries: asked again at once (the answer is the same)
        calls = collections.deque(waiting)
        calls.extend(fresh)
        while calls or later:
            call = calls.popleft() if calls else heapq.heappop(later)[2]
            method, url, body, _ = call.request
            mock = self.answers.get((method, url, _json_key(body)))
            if mock is None:
                shown = f"{method} {url}" + (f" with body {body}" if body is not None else "")
                raise LookupError_(
                    f"{self.spec['name']}: no mock answers {shown}; add it to the case's MOCKS: "
                    f'{{"REQUEST": "{method} {url}"'
                    + (', "BODY": ...' if body is not None else "")
                    + ', "RESPONSE": ...}'
                )
            counts["calls"] += 1
            response = mock.get("RESPONSE")
            text = response if isinstance(response, str) else json.dumps(response)
            call.body = [] if response is None else [text.encode()]
            latencies.append(0.0)
            self._answered(call, int(mock.get("STATUS", 200)), done, counts, later)


class _Pool:
    """The query answers, as asyncpg's pool gives rows."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]):
        self.answers = answers

    async def fetch(self, query: str) -> list[dict[str, Any]]:
        return self.answers[query]

    async def close(self) -> None:
        """Nothing was opened."""


class MockPgCaller(PgCaller):
    """A Postgres lookup's queries answered from the case's mocks."""

    def __init__(self, spec: dict[str, Any]):  # noqa: D107 - no asyncpg pool: nothing is sent

        AsyncCaller.__init__(self, spec)
        answers = {" ".join(m["QUERY"].split()): list(m.get("RESPONSE") or []) for m in spec["mocks"] if m.get("QUERY")}
        self.pool = _Pool(answers)

    async def _attempt(self, query: str, counts: dict, latencies: list, last: bool) -> tuple[bool, Any]:
        normal = " ".join(query.split())
        if normal not in self.pool.answers:
            raise LookupError_(
                f"{self.spec['name']}: no mock answers the query {query}; add it to the case's MOCKS: "
                f'{{"QUERY": "{query}", "RESPONSE": [...]}}'
            )
        return await super()._attempt(normal, counts, latencies, last)


class MockGrpcCaller(GrpcCaller):
    """A gRPC lookup's calls answered from the case's mocks (the request and reply messages from the job's
    descriptors, as for a real call)."""

    def __init__(self, spec: dict[str, Any]):  # noqa: D107 - no channel: nothing is sent
        from google.protobuf import descriptor_pb2, json_format, message_factory

        from dagger.schema.descriptor_sets import build_pool  # start-up: loads google

        AsyncCaller.__init__(self, spec)
        pool = build_pool(descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["descriptor_set_b64"])))
        self.request_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(spec["request_message"]))
        response_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(spec["response_message"]))
        method = spec["method"].lstrip("/")
        self.answers = {}
        for mock in spec["mocks"]:
            if mock.get("REQUEST", "").lstrip("/") != method:
                continue
            request = json_format.ParseDict(mock.get("BODY") or {}, self.request_class())
            self.answers[request.SerializeToString(deterministic=True)] = (mock, response_class)
        self.metadata = ()
        self.method = self._answer

    async def _answer(self, request: Any, timeout: float, metadata: Any) -> Any:  # noqa: ARG002
        import grpc
        from google.protobuf import json_format

        found = self.answers.get(request.SerializeToString(deterministic=True))
        if found is None:
            shown = json_format.MessageToJson(request, indent=None, preserving_proto_field_name=True)
            raise LookupError_(
                f"{self.spec['name']}: no mock answers {self.spec['method']} with body {shown}; add it to the case's "
                f'MOCKS: {{"REQUEST": "{self.spec["method"]}", "BODY": {shown}, "RESPONSE": ...}}'
            )
        mock, response_class = found
        status = mock.get("STATUS", 200)
        if status not in (200, "OK"):
            code = getattr(grpc.StatusCode, str(status), None)
            if code is None:
                raise LookupError_(f"{self.spec['name']}: a mock's STATUS {status!r} is not a gRPC status name")
            metadata = grpc.aio.Metadata()
            raise grpc.aio.AioRpcError(code, metadata, metadata, details=f"mocked {code.name}")
        return json_format.ParseDict(mock.get("RESPONSE") or {}, response_class())

    async def _aclose(self) -> None:
        """No channel was opened."""
