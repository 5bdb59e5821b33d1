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

from dagger.processors.external.base import AsyncCaller, LookupError_, as_text


class PgCaller(AsyncCaller):
    """Executor side: an asyncpg pool of ``capacity`` connections per task, reused by every batch of the task."""

    def __init__(self, spec: dict[str, Any]):
        import asyncpg

        super().__init__(spec)

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

    async def _aclose(self) -> None:
        await self.pool.close()

    async def _attempt(self, query: str, counts: dict, latencies: list, last: bool) -> tuple[bool, Any]:
        """One query: its result row as a dict ({} for no row)."""
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
