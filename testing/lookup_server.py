"""A local HTTP lookup service with controllable latency and failures, for the tests and the enrichment bench.

Routes (JSON answers):

* ``GET /customers/<id>``: ``{"id", "name": "name-<id>", "tier": len(id), "balance": len(id) + 0.25, "since": ISO
  timestamp, "address": {"city"}, "tags": [..]}``; ids ``missing`` → 404, ``boom`` → 500, ``slow`` → answers after 2 s, ``bad`` → 400,
  ``flaky-*`` → 503 for the first two calls of that id, then 200; ``lenient`` → 200 with JSON that is not
  strict (``{id: lenient, name: 'name-lenient', tier: 7}``); ``html`` → 200 with an HTML body.
* ``POST``/``PUT /score``: ``{"score": <length of the body>, "method", "body": <the parsed body>}``.

``delay_ms`` delays every answer; ``calls`` counts requests per path; ``headers`` keeps the last request's
headers per path; ``arrivals`` the arrival time of every request.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from typing import Any


class LookupServer:
    """An aiohttp server on a free loopback port, run in a background thread."""

    def __init__(self, delay_ms: float = 0.0):
        self.delay_ms = delay_ms
        self.calls: collections.Counter[str] = collections.Counter()
        self.headers: dict[str, dict[str, str]] = {}
        self.arrivals: list[float] = []  # time.monotonic() of every request, in arrival order
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lookup-server", daemon=True)
        self._runner: Any = None

    def start(self) -> LookupServer:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/customers/{id}", self._customer)
        app.router.add_post("/score", self._score)
        app.router.add_put("/score", self._score)
        self._thread.start()

        async def up() -> int:
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            return site._server.sockets[0].getsockname()[1]

        port = asyncio.run_coroutine_threadsafe(up(), self._loop).result(30)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def customers_lookup(self, variable: str, output_mapping: dict[str, str], **extra: str) -> dict[str, Any]:
        """A post-processor's ``http`` external source that GETs ``/customers/<variable's value>`` and maps
        ``output_mapping`` (column -> JSONPath) from the answer, failing the batch on errors, typed as JSON."""
        return {
            "endpoint": f"{self.url}/customers/",
            "verb": "get",
            "request_pattern": "%s",
            "request_variables": variable,
            "stream_timeout": "5000",
            "connect_timeout": "2000",
            "capacity": "20",
            "fail_on_errors": "true",
            "retain_response_type": "true",
            "output_mapping": {column: {"path": path} for column, path in output_mapping.items()},
            **extra,
        }

    def __enter__(self) -> LookupServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _pause(self, request: Any) -> None:
        import time

        self.arrivals.append(time.monotonic())
        self.calls[request.path] += 1
        self.headers[request.path] = dict(request.headers)
        if self.delay_ms:
            await asyncio.sleep(self.delay_ms / 1000)

    async def _customer(self, request: Any) -> Any:
        from aiohttp import web

        await self._pause(request)
        customer = request.match_info["id"]
        if customer == "missing":
            return web.json_response({"error": "no such customer"}, status=404)
        if customer == "boom":
            return web.json_response({"error": "internal"}, status=500)
        if customer == "bad":
            return web.json_response({"error": "bad request"}, status=400)
        if customer == "slow":
            await asyncio.sleep(2)
        if customer.startswith("flaky-") and self.calls[request.path] <= 2:
            return web.json_response({"error": "try again"}, status=503)
        if customer == "lenient":  # what json-smart reads and strict JSON does not: unquoted keys and a value
            return web.Response(text=f"{{id: {customer}, name: 'name-{customer}', tier: 7}}", content_type="text/plain")
        if customer == "html":
            return web.Response(text="<html>maintenance</html>", content_type="text/html")
        return web.json_response(
            {
                "id": customer,
                "name": f"name-{customer}",
                "tier": len(customer),
                "balance": len(customer) + 0.25,
                "since": "2026-01-02T03:04:05Z",
                "address": {"city": f"city-{customer}"},
                "tags": ["a", customer],
            }
        )

    async def _score(self, request: Any) -> Any:
        from aiohttp import web

        await self._pause(request)
        text = await request.text()
        return web.json_response({"score": len(text), "method": request.method, "body": json.loads(text)})
