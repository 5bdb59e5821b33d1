"""Postgres lookups (``external_source.pg``): one query per row on a pool of ``capacity`` connections.

As Dagger: ``query_pattern`` gets its ``%s`` from ``query_variables`` by text substitution (quote string values
in the pattern: ``where id = '%s'``; the values are not escaped, so take variables from trusted columns), the
query must return at most one row (more is ``invalid_configuration``: the batch fails with
``fail_on_errors``, else the row passes on unenriched), no row means no enrichment, and each
``output_mapping`` entry ``{"output column": "result column"}`` must name a result column (a missing one always
fails). ``stream_timeout`` bounds each query, ``connect_timeout`` each connection, ``idle_timeout`` closes idle
connections. Uses asyncpg (``pip install dagger-on-spark[postgres]``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dagger.processors.external.base import LookupError_, as_text

_CACHES: dict[str, dict[Any, tuple[float, Any]]] = {}


class PgCaller:
    """Executor side: an asyncpg pool per task, reused by every batch of the task."""

    def __init__(self, spec: dict[str, Any]):
        import asyncpg

        self.spec = spec
        self.loop = asyncio.new_event_loop()

        async def make() -> Any:
            return await asyncpg.create_pool(
                host=spec["host"],
                port=spec["port"],
                user=spec["user"],
                password=spec["password"],
                database=spec["database"],
                min_size=0,
                max_size=spec["capacity"],
                timeout=spec["connect_timeout"] / 1000,
                max_inactive_connection_lifetime=spec["idle_timeout"] / 1000,
            )

        try:
            self.pool = self.loop.run_until_complete(make())
        except Exception as exc:  # noqa: BLE001 - asyncpg and OS errors alike
            self.loop.close()
            raise LookupError_(
                f"{spec['name']}: cannot connect to postgres://{spec['user']}@{spec['host']}:{spec['port']}/"
                f"{spec['database']}: {exc}"
            ) from None
        self.cache = _CACHES.setdefault(spec["name"], {}) if spec["cache_ttl_seconds"] else None

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.close())
        self.loop.close()

    def call_all(self, queries: list[str | None]) -> tuple[list[Any], dict[str, int], list[float]]:
        """The result row (a dict) or None per query (None: skipped), counts and latencies."""
        counts = {k: 0 for k in ("calls", "success", "empty_input", "cache_hits", "timeouts", "retries")}
        counts.update({"failures_other": 0, "invalid_configuration": 0})
        latencies: list[float] = []

        async def one(query: str | None) -> Any:
            if query is None:
                counts["empty_input"] += 1
                return None
            if self.cache is not None:
                hit = self.cache.get(query)
                if hit is not None and hit[0] > time.monotonic():
                    counts["cache_hits"] += 1
                    return hit[1]
            attempt = 0
            while True:
                retriable, answer = await self._query(query, counts, latencies, last=attempt >= self.spec["retries"])
                if not retriable:
                    break
                attempt += 1
                counts["retries"] += 1
                await asyncio.sleep(self.spec["retry_backoff_ms"] / 1000 * 2 ** (attempt - 1))
            if self.cache is not None and answer is not None:
                self.cache[query] = (time.monotonic() + self.spec["cache_ttl_seconds"], answer)
            return answer

        async def everything() -> list[Any]:
            return await asyncio.gather(*(one(q) for q in queries))

        return self.loop.run_until_complete(everything()), counts, latencies

    async def _query(self, query: str, counts: dict[str, int], latencies: list[float], last: bool) -> tuple[bool, Any]:
        counts["calls"] += 1
        started = time.monotonic()
        where = f"{self.spec['name']} ({query})"
        try:
            rows = await asyncio.wait_for(self.pool.fetch(query), self.spec["stream_timeout"] / 1000)
        except TimeoutError:
            latencies.append((time.monotonic() - started) * 1000)
            counts["timeouts"] += 1
            return self._failed(f"{where} timed out after {self.spec['stream_timeout']} ms", last, True)
        except Exception as exc:  # noqa: BLE001 - asyncpg's errors (syntax, connection) have no common base we need
            latencies.append((time.monotonic() - started) * 1000)
            counts["failures_other"] += 1
            return self._failed(f"{where} failed: {exc}", last, retriable=isinstance(exc, OSError))
        latencies.append((time.monotonic() - started) * 1000)
        if len(rows) > 1:
            counts["invalid_configuration"] += 1
            return self._failed(
                f"{where} returned {len(rows)} rows; a lookup query must return at most one", True, False
            )
        counts["success"] += 1
        return False, dict(rows[0]) if rows else {}

    def _failed(self, message: str, last: bool, retriable: bool) -> tuple[bool, Any]:
        if retriable and not last:
            return True, None
        if self.spec["fail_on_errors"]:
            raise LookupError_(message + " (fail_on_errors is true)")
        return False, None


def build_queries(spec: dict[str, Any], columns: dict[str, list[Any]], rows: int) -> list[str | None]:
    """One query per row, or None when every variable is empty."""
    variables = spec["query_variables"]
    out: list[str | None] = []
    for i in range(rows):
        values = [as_text(columns[c][i]) for c in variables]
        if values and all(v in ("", "null") for v in values):
            out.append(None)
            continue
        out.append(spec["query_pattern"] % tuple(values) if variables else spec["query_pattern"])
    return out
