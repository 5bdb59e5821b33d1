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
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from dagger.processors.external.base import LookupError_, as_text

_CACHES: dict[str, dict[Any, tuple[float, Any]]] = {}


class HttpCaller:
    """Executor side: an aiohttp session per task, reused by every batch of the task."""

    def __init__(self, spec: dict[str, Any]):
        import aiohttp

        self.spec = spec
        self.loop = asyncio.new_event_loop()
        socket = spec.get("socket_timeout")
        timeout = aiohttp.ClientTimeout(
            total=spec["stream_timeout"] / 1000,
            connect=spec["connect_timeout"] / 1000,
            sock_read=socket / 1000 if socket else None,
        )
        connector = aiohttp.TCPConnector(limit=spec["capacity"], loop=self.loop)

        async def make() -> Any:
            return aiohttp.ClientSession(connector=connector, timeout=timeout)

        self.session = self.loop.run_until_complete(make())
        self.cache = _CACHES.setdefault(spec["name"], {}) if spec["cache_ttl_seconds"] else None
        self.next_slot = 0.0

    def close(self) -> None:
        self.loop.run_until_complete(self.session.close())
        self.loop.close()

    def call_all(self, requests: list[tuple | None]) -> tuple[list[Any], dict[str, int], list[float]]:
        """Answers (parsed JSON, or None) for ``requests`` (None: skipped), counts and latencies."""
        counts = {"calls": 0, "success": 0, "empty_input": 0, "cache_hits": 0, "timeouts": 0, "retries": 0}
        counts.update({"failures_code404": 0, "failures_code4XX": 0, "failures_code5XX": 0, "failures_other": 0})
        latencies: list[float] = []
        semaphore = asyncio.Semaphore(self.spec["capacity"])
        in_flight: dict[tuple, asyncio.Future] = {}

        async def one(request: tuple | None) -> Any:
            if request is None:
                counts["empty_input"] += 1
                return None
            if self.cache is not None:
                hit = self.cache.get(request)
                if hit is not None and hit[0] > time.monotonic():
                    counts["cache_hits"] += 1
                    return hit[1]
                if request in in_flight:  # the same call is under way: share its answer
                    counts["cache_hits"] += 1
                    return await asyncio.shield(in_flight[request])
                in_flight[request] = asyncio.get_running_loop().create_future()
            try:
                async with semaphore:
                    answer = await self._with_retries(request, counts, latencies)
            except BaseException as exc:
                if request in in_flight:
                    in_flight.pop(request).set_exception(exc)
                raise
            if self.cache is not None:
                if answer is not None:
                    self.cache[request] = (time.monotonic() + self.spec["cache_ttl_seconds"], answer)
                in_flight.pop(request).set_result(answer)
            return answer

        async def everything() -> list[Any]:
            return await asyncio.gather(*(one(r) for r in requests))

        return self.loop.run_until_complete(everything()), counts, latencies

    async def _with_retries(self, request: tuple, counts: dict[str, int], latencies: list[float]) -> Any:
        attempt = 0
        while True:
            retriable, answer = await self._call(request, counts, latencies, last=attempt >= self.spec["retries"])
            if not retriable:
                return answer
            attempt += 1
            counts["retries"] += 1
            await asyncio.sleep(self.spec["retry_backoff_ms"] / 1000 * 2 ** (attempt - 1))

    async def _throttle(self) -> None:
        rate = self.spec["rate_limit_per_second"]
        if not rate:
            return
        now = time.monotonic()
        slot = max(now, self.next_slot)
        self.next_slot = slot + 1 / rate
        if slot > now:
            await asyncio.sleep(slot - now)

    async def _call(
        self, request: tuple, counts: dict[str, int], latencies: list[float], last: bool
    ) -> tuple[bool, Any]:
        import aiohttp

        method, url, body, headers = request
        await self._throttle()
        counts["calls"] += 1
        started = time.monotonic()
        where = f"{self.spec['name']} ({method} {url})"
        try:
            async with self.session.request(method, url, data=body, headers=dict(headers)) as response:
                text = await response.text()
                latencies.append((time.monotonic() - started) * 1000)
                status = response.status
        except TimeoutError:
            latencies.append((time.monotonic() - started) * 1000)
            counts["timeouts"] += 1
            return self._failed(f"{where} timed out after {self.spec['stream_timeout']} ms", last, retriable=True)
        except aiohttp.ClientError as exc:
            latencies.append((time.monotonic() - started) * 1000)
            counts["failures_other"] += 1
            return self._failed(f"{where} failed: {exc}", last, retriable=True)
        if 200 <= status < 300:
            counts["success"] += 1
            if spec_only_200(self.spec) and status != 200:
                return False, None  # Elasticsearch: other 2xx answers pass the row on unenriched
            try:
                return False, json.loads(text) if text else None
            except ValueError:
                raise LookupError_(f"{where} answered {status} with a body that is not JSON: {text[:200]!r}") from None
        key = "failures_code404" if status == 404 else f"failures_code{str(status)[0]}XX"
        counts[key if key in counts else "failures_other"] += 1
        return self._failed(f"{where} answered {status}: {text[:200]}", last, retriable=status >= 500)

    def _failed(self, message: str, last: bool, retriable: bool) -> tuple[bool, Any]:
        if retriable and not last:
            return True, None
        if self.spec["fail_on_errors"]:
            raise LookupError_(message + " (fail_on_errors is true)")
        return False, None


def build_requests(spec: dict[str, Any], columns: dict[str, list[Any]], rows: int) -> list[tuple | None]:
    """One ``(method, url, body, headers)`` per row, or None for a row whose variables are all empty."""
    method = spec["verb"].upper()
    out: list[tuple | None] = []
    endpoint_vars, request_vars, header_vars = (
        spec["endpoint_variables"],
        spec["request_variables"],
        spec["header_variables"],
    )
    for i in range(rows):
        endpoint_values = [as_text(columns[c][i]) for c in endpoint_vars]
        request_values = [as_text(columns[c][i]) for c in request_vars]
        header_values = [as_text(columns[c][i]) for c in header_vars]
        every = endpoint_values + request_values
        if every and all(v in ("", "null") for v in every):
            out.append(None)
            continue
        endpoint = spec["endpoint"] % tuple(endpoint_values) if endpoint_vars else spec["endpoint"]
        pattern = spec["request_pattern"] % tuple(request_values) if request_vars else spec["request_pattern"]
        headers = dict(spec["headers"])
        if spec["header_pattern"]:
            text = spec["header_pattern"] % tuple(header_values) if header_vars else spec["header_pattern"]
            headers.update({k: str(v) for k, v in json.loads(text).items()})
        if method == "GET":
            out.append((method, endpoint + pattern, None, tuple(sorted(headers.items()))))
        else:
            headers.setdefault("Content-Type", "application/json")
            out.append((method, endpoint, pattern, tuple(sorted(headers.items()))))
    return out


def spec_only_200(spec: dict[str, Any]) -> bool:
    return spec.get("kind") == "es"


def build_es_requests(spec: dict[str, Any], columns: dict[str, list[Any]], rows: int) -> list[tuple | None]:
    """Elasticsearch: ``GET <host>:<port>`` + ``endpoint_pattern``, hosts taken in turn, basic auth if given."""
    hosts, variables = spec["hosts"], spec["endpoint_variables"]
    headers = tuple(sorted(spec["headers"].items()))
    out: list[tuple | None] = []
    for i in range(rows):
        values = [as_text(columns[c][i]) for c in variables]
        if values and all(v in ("", "null") for v in values):
            out.append(None)
            continue
        path = spec["endpoint_pattern"] % tuple(values) if variables else spec["endpoint_pattern"]
        out.append(("GET", hosts[i % len(hosts)] + path, None, headers))
    return out
