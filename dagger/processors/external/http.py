"""HTTP lookups (``external_source.http``): one call per row, ``capacity`` in flight, results in row order.

Per Dagger: ``GET`` calls ``endpoint`` (``%s`` from ``endpoint_variables``) + ``request_pattern`` (``%s`` from
``request_variables``); ``POST``/``PUT`` send ``request_pattern`` as the JSON body. Static ``headers`` are merged
with ``header_pattern`` (a JSON object template, ``%s`` from ``header_variables``). A 2xx answer is read as JSON
and each ``output_mapping`` path (JSONPath) fills its column, typed through the output proto; a mapped path that
is missing from a 2xx answer always fails the batch. Other statuses, connection errors and timeouts
(``stream_timeout`` per call, ``connect_timeout`` to connect) are counted and fail the batch when
``fail_on_errors`` is true; otherwise the row passes on with null enrichment. Rows whose variables are all
empty are not sent (``empty_input``).

Beyond Dagger, all off by default: ``cache_ttl_seconds`` (a per-executor response cache), ``retries`` with
``retry_backoff_ms`` (exponential, for timeouts, connection errors and 5xx) and ``rate_limit_per_second``.

One module (~340 lines) because it is one caller: requests built from patterns, the async client, its cache,
retries and rate limit, all on the executors.
"""

from __future__ import annotations

import collections
import heapq
import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dagger.processors.external.base import (
    NOT_JSON,
    LookupError_,
    as_text,
    new_counts,
    parse_answer,
    response_cache,
)
from dagger.worker_cache import BuiltCache, content_key


def _release(caller: HttpCaller) -> None:
    caller.release()


#: one caller per lookup spec per worker, its connections kept across tasks
_CALLERS: BuiltCache[HttpCaller] = BuiltCache(16, on_evict=_release)

#: libcurl's code for a connect or transfer that ran out of time (CURLE_OPERATION_TIMEDOUT)
_TIMED_OUT = 28


class _Call:
    """One request under way or waiting: the rows it answers and how often it was tried."""

    __slots__ = ("request", "rows", "attempt", "body", "hosts_tried", "first_try")

    def __init__(self, request: tuple, rows: list[int]):
        self.request, self.rows, self.attempt, self.body = request, rows, 0, []
        self.hosts_tried, self.first_try = 1, 0.0


class HttpCaller:
    """Executor side: libcurl's multi interface (pycurl) with ``capacity`` reusable handles.

    One caller per source and Python worker, kept across tasks so that its keep-alive connections are reused
    by every micro-batch. libcurl does the I/O, connection reuse and timeouts in C; Python only starts calls and
    collects answers, which is what lets one core make several thousand lookups a second.
    """

    def __init__(self, spec: dict[str, Any]):
        import pycurl

        self.spec = spec
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, spec["capacity"])
        self.multi.setopt(pycurl.M_MAXCONNECTS, spec["capacity"])
        self.free = [self._handle() for _ in range(spec["capacity"])]
        self.cache = response_cache(spec)
        self.next_slot = 0.0
        self._headers: dict[tuple, list[str]] = {}

    @classmethod
    def shared(cls, spec: dict[str, Any]) -> HttpCaller:
        """The worker's caller for ``spec`` (created on first use)."""
        return _CALLERS.get(content_key(spec), lambda: cls(spec))

    def _handle(self) -> Any:
        import pycurl

        handle = pycurl.Curl()
        handle.setopt(pycurl.NOSIGNAL, 1)
        handle.setopt(pycurl.CONNECTTIMEOUT_MS, int(self.spec["connect_timeout"]))
        handle.setopt(pycurl.TIMEOUT_MS, int(self.spec["stream_timeout"]))
        socket = self.spec.get("socket_timeout")
        if socket:  # no byte for this long: give up (libcurl counts whole seconds)
            handle.setopt(pycurl.LOW_SPEED_LIMIT, 1)
            handle.setopt(pycurl.LOW_SPEED_TIME, max(1, round(socket / 1000)))
        return handle

    def close(self) -> None:
        """Nothing to do: the caller and its connections live as long as the worker (or until evicted)."""

    def release(self) -> None:
        """Close the connections (the worker's cache dropped this caller)."""
        for handle in self.free:
            handle.close()
        self.free = []
        self.multi.close()

    def call_all(self, requests: Iterable[tuple | None], done: Callable[[int, Any], None]) -> tuple[dict, list]:
        """Call every request (None: skipped) and hand each row's answer (parsed JSON, or None) to ``done(row,
        answer)`` as it arrives; returns the counts and latencies.

        Without a cache ``requests`` is read lazily, a request whenever a handle is free, so that building
        requests and typing answers happen while calls are under way.
        """
        counts, latencies = new_counts(), []
        waiting: collections.deque[_Call] = collections.deque()
        if self.cache is None:
            fresh: Iterator[_Call] = self._fresh(requests, counts)
        else:
            fresh = iter(())
            calls = {}
            for i, request in enumerate(requests):
                if request is None:
                    counts["empty_input"] += 1
                    continue
                hit = self.cache.get(request)
                if hit is not None:
                    counts["cache_hits"] += 1
                    done(i, hit)
                elif request in calls:  # the same call is in this batch already: share its answer
                    counts["cache_hits"] += 1
                    calls[request].rows.append(i)
                else:
                    calls[request] = _Call(request, [i])
                    waiting.append(calls[request])
        self._run(waiting, fresh, done, counts, latencies)
        return counts, latencies

    @staticmethod
    def _fresh(requests: Iterable[tuple | None], counts: dict) -> Iterator[_Call]:
        for i, request in enumerate(requests):
            if request is None:
                counts["empty_input"] += 1
            else:
                yield _Call(request, [i])

    def _run(self, waiting: collections.deque, fresh: Iterator, done: Callable, counts: dict, latencies: list) -> None:
        """Keep up to ``capacity`` calls under way until every call is answered or given up."""
        import pycurl

        later: list[tuple[float, int, _Call]] = []  # retries waiting out their backoff
        running: dict[Any, _Call] = {}
        rate = self.spec["rate_limit_per_second"]
        more = True  # ``fresh`` may still have calls
        try:
            while waiting or later or running or more:
                now = time.monotonic()
                while later and later[0][0] <= now:
                    waiting.append(heapq.heappop(later)[2])
                pause = later[0][0] - now if later else 1.0
                while self.free and (waiting or more):
                    if not waiting:
                        call = next(fresh, None)
                        if call is None:
                            more = False
                            break
                        waiting.append(call)
                    if rate:
                        slot = max(now, self.next_slot)
                        if slot > now:
                            pause = min(pause, slot - now)
                            break
                        self.next_slot = slot + 1 / rate
                    call = waiting.popleft()
                    handle = self.free.pop()
                    self._start(handle, call)
                    counts["calls"] += 1
                    running[handle] = call
                if running:
                    self.multi.perform()
                    left = 1
                    while left:
                        left, finished, failed = self.multi.info_read()
                        for handle in finished:
                            call = running.pop(handle)
                            self._release(handle)
                            latencies.append(handle.getinfo(pycurl.TOTAL_TIME) * 1000)
                            self._answered(call, handle.getinfo(pycurl.RESPONSE_CODE), done, counts, later)
                        for handle, code, message in failed:
                            call = running.pop(handle)
                            self._release(handle)
                            latencies.append(handle.getinfo(pycurl.TOTAL_TIME) * 1000)
                            self._broken(call, code, message, counts, later)
                    if running:
                        self.multi.select(min(pause, 1.0))
                elif pause > 0 and (later or waiting):
                    time.sleep(min(pause, 1.0))
        finally:
            for handle in list(running):  # a failed batch leaves no call behind on the shared handles
                self._release(handle)

    def _start(self, handle: Any, call: _Call) -> None:
        import pycurl

        method, url, body, headers = call.request
        call.body = []
        if not call.first_try:
            call.first_try = time.monotonic()
        handle.setopt(pycurl.URL, url)
        handle.setopt(pycurl.WRITEFUNCTION, call.body.append)
        if body is None:
            handle.setopt(pycurl.HTTPGET, 1)
        else:
            handle.setopt(pycurl.POSTFIELDS, body)
        handle.setopt(pycurl.CUSTOMREQUEST, method)
        if headers not in self._headers:
            self._headers[headers] = [f"{k}: {v}" for k, v in headers] + ([] if body is None else ["Expect:"])
        handle.setopt(pycurl.HTTPHEADER, self._headers[headers])
        self.multi.add_handle(handle)

    def _release(self, handle: Any) -> None:
        self.multi.remove_handle(handle)
        self.free.append(handle)

    def _where(self, call: _Call) -> str:
        return f"{self.spec['name']} ({call.request[0]} {call.request[1]})"

    def _answered(self, call: _Call, status: int, done: Callable, counts: dict, later: list) -> None:
        text = b"".join(call.body)
        answer = None
        if 200 <= status < 300:
            counts["success"] += 1
            if not (spec_only_200(self.spec) and status != 200) and text:  # Elasticsearch: other 2xx pass on
                answer = parse_answer(text, self.spec["name"])
                if answer is NOT_JSON:
                    counts["invalid_response"] += 1
                    if self.spec["fail_on_errors"]:
                        raise LookupError_(
                            f"{self._where(call)} answered {status} with a body that is not JSON: {text[:200]!r}"
                            " (fail_on_errors is true)"
                        )
                    answer = None  # the rows pass on unenriched, counted
            if self.cache is not None and answer is not None:
                self.cache.put(call.request, answer)
            for row in call.rows:
                done(row, answer)
            return
        key = "failures_code404" if status == 404 else f"failures_code{str(status)[0]}XX"
        counts[key if key in counts else "failures_other"] += 1
        shown = text[:200].decode("utf-8", "replace")
        message = f"{self._where(call)} answered {status}: {shown}"
        if status in (502, 503, 504) and self._fail_over(call, counts, later):
            return
        self._failed(call, message, status >= 500, counts, later)

    def _broken(self, call: _Call, code: int, message: str, counts: dict, later: list) -> None:
        if code == _TIMED_OUT:
            counts["timeouts"] += 1
            text = f"{self._where(call)} timed out ({message}; stream_timeout {self.spec['stream_timeout']} ms)"
        else:
            counts["failures_other"] += 1
            text = f"{self._where(call)} failed: {message}"
        if self._fail_over(call, counts, later):
            return
        self._failed(call, text, True, counts, later)

    def _fail_over(self, call: _Call, counts: dict, later: list) -> bool:
        """Elasticsearch: send a call that failed on one host (no connection, timeout, 502/503/504) to the next
        host at once, as Elasticsearch's client does, while hosts remain and ``retry_timeout`` has not passed
        since the first try."""
        hosts = self.spec.get("hosts") or []
        if call.hosts_tried >= len(hosts):
            return False
        if (time.monotonic() - call.first_try) * 1000 >= self.spec.get("retry_timeout", 0):
            return False
        method, url, body, headers = call.request
        current = next((i for i, host in enumerate(hosts) if url.startswith(host)), None)
        if current is None:
            return False
        following = hosts[(current + 1) % len(hosts)]
        call.request = (method, following + url[len(hosts[current]) :], body, headers)
        call.hosts_tried += 1
        counts["retries"] += 1
        heapq.heappush(later, (time.monotonic(), id(call), call))
        return True

    def _failed(self, call: _Call, message: str, retriable: bool, counts: dict, later: list) -> None:
        """Retry after a backoff, fail the batch (``fail_on_errors``), or leave the rows unenriched."""
        if retriable and call.attempt < self.spec["retries"]:
            call.attempt += 1
            counts["retries"] += 1
            ready = time.monotonic() + self.spec["retry_backoff_ms"] / 1000 * 2 ** (call.attempt - 1)
            heapq.heappush(later, (ready, id(call), call))
            return
        if self.spec["fail_on_errors"]:
            raise LookupError_(message + " (fail_on_errors is true)")


def build_requests(spec: dict[str, Any], columns: dict[str, list[Any]], rows: int) -> Iterator[tuple | None]:
    """One ``(method, url, body, headers)`` per row, or None for a row whose variables are all empty."""
    method = spec["verb"].upper()
    endpoint_vars, request_vars, header_vars = (
        spec["endpoint_variables"],
        spec["request_variables"],
        spec["header_variables"],
    )
    static = dict(spec["headers"])
    if method != "GET":
        static.setdefault("Content-Type", "application/json")
    fixed = tuple(sorted(static.items()))
    for i in range(rows):
        endpoint_values = [as_text(columns[c][i]) for c in endpoint_vars]
        request_values = [as_text(columns[c][i]) for c in request_vars]
        every = endpoint_values + request_values
        if every and all(v in ("", "null") for v in every):
            yield None
            continue
        endpoint = spec["endpoint"] % tuple(endpoint_values) if endpoint_vars else spec["endpoint"]
        pattern = spec["request_pattern"] % tuple(request_values) if request_vars else spec["request_pattern"]
        headers = fixed
        if spec["header_pattern"]:
            values = tuple(as_text(columns[c][i]) for c in header_vars)
            text = spec["header_pattern"] % values if header_vars else spec["header_pattern"]
            merged = dict(static)
            merged.update({k: str(v) for k, v in json.loads(text).items()})
            headers = tuple(sorted(merged.items()))
        if method == "GET":
            yield method, endpoint + pattern, None, headers
        else:
            yield method, endpoint, pattern, headers


def spec_only_200(spec: dict[str, Any]) -> bool:
    return spec.get("kind") == "es"


def build_es_requests(spec: dict[str, Any], columns: dict[str, list[Any]], rows: int) -> Iterator[tuple | None]:
    """Elasticsearch: ``GET <host>:<port>`` + ``endpoint_pattern``, hosts taken in turn, basic auth if given."""
    hosts, variables = spec["hosts"], spec["endpoint_variables"]
    headers = tuple(sorted(spec["headers"].items()))
    for i in range(rows):
        values = [as_text(columns[c][i]) for c in variables]
        if values and all(v in ("", "null") for v in values):
            yield None
            continue
        path = spec["endpoint_pattern"] % tuple(values) if variables else spec["endpoint_pattern"]
        yield "GET", hosts[i % len(hosts)] + path, None, headers
