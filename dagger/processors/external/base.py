"""What every external lookup shares: variables and ``%s`` patterns, the empty-input skip, typing responses
through the output proto, and the per-source metrics.

A lookup runs on the executors inside ``mapInArrow``: each Arrow batch of SQL output rows becomes one set of
concurrent calls (at most ``capacity`` in flight), whose results are appended as typed columns **in row
order** (Dagger's ordered async I/O).

One module (~330 lines): what every lookup caller shares (the async loop, the answer cache, metrics, pattern
checks and value conversion), used by each caller module.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError, DaggerError
from dagger.latency import LatencyHistogram
from dagger.lenient_json import loads as lenient_loads
from dagger.worker_cache import AnswerCache, BuiltCache, content_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: counter names kept per external source (Dagger's metric names where it has them)
METRICS = (
    "calls",
    "success",
    "failures_code404",
    "failures_code4XX",
    "failures_code5XX",
    "failures_other",
    "timeouts",
    "empty_input",
    "cache_hits",
    "retries",
    "invalid_configuration",
    "invalid_response",
)


class LookupError_(DaggerError):  # noqa: N801 - "LookupError" is a builtin
    """An external lookup failed, or answered what the job cannot read, and the source has ``fail_on_errors``."""


#: what :func:`parse_answer` returns for a body that is not JSON, even read leniently
NOT_JSON = object()
_lenient_warned: set[str] = set()


def parse_answer(text: bytes, where: str) -> Any:
    """A response body as JSON, strict or as leniently as Dagger's json-smart reads it (:mod:`dagger.lenient_json`;
    one warning per source and worker); :data:`NOT_JSON` when neither reads it."""
    try:
        value, strict = lenient_loads(text)
    except json.JSONDecodeError:
        return NOT_JSON
    if strict is not None and where not in _lenient_warned:
        _lenient_warned.add(where)
        log.warning(
            "%s answered JSON that is not strict (e.g. %r); reading it leniently, as Dagger does", where, text[:80]
        )
    return value


def new_counts() -> dict[str, int]:
    """Zeroed counters for one batch of calls (every name in :data:`METRICS`)."""
    return dict.fromkeys(METRICS, 0)


#: per-worker answer caches, one per lookup source: keyed by the source's whole spec, since two jobs in one worker
#: may both have an ``HTTP.0`` asking different services
_CACHES: BuiltCache[AnswerCache] = BuiltCache(64)
#: answers one source keeps per worker at most (the oldest go first)
MAX_ANSWERS = 100_000


def response_cache(spec: dict[str, Any]) -> AnswerCache | None:
    """The worker's answer cache of a source, or None when ``cache_ttl_seconds`` is off."""
    ttl = spec["cache_ttl_seconds"]
    if not ttl:
        return None
    return _CACHES.get(content_key(spec), lambda: AnswerCache(ttl, MAX_ANSWERS))


class AsyncCaller:
    """Executor side of the asyncio lookups (Postgres, gRPC): an event loop of their own, at most ``capacity``
    calls in flight, the empty-input skip, the response cache and retries with exponential backoff.

    A subclass makes one attempt (:meth:`_attempt`) and closes its client (:meth:`_aclose`).
    """

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.loop = asyncio.new_event_loop()
        self.cache = response_cache(spec)

    async def _attempt(self, request: Any, counts: dict, latencies: list, last: bool) -> tuple[bool, Any]:
        """One try: ``(retry?, answer)``; counts the call and its outcome, records its latency."""
        raise NotImplementedError

    async def _aclose(self) -> None:
        """Close the client (pool, channel)."""

    def close(self) -> None:
        self.loop.run_until_complete(self._aclose())
        self.loop.close()

    def call_all(self, requests: Iterable[Any], done: Callable[[int, Any], None]) -> tuple[dict, list]:
        """Call every request (None: skipped), hand each row's answer (or None) to ``done(row, answer)``;
        returns the counts and latencies."""
        counts, latencies = new_counts(), []
        spec = self.spec
        semaphore = asyncio.Semaphore(spec["capacity"])

        async def one(row: int, request: Any) -> None:
            if request is None:
                counts["empty_input"] += 1
                return
            if self.cache is not None:
                hit = self.cache.get(request)
                if hit is not None:
                    counts["cache_hits"] += 1
                    done(row, hit)
                    return
            attempt = 0
            async with semaphore:
                while True:
                    retriable, answer = await self._attempt(request, counts, latencies, attempt >= spec["retries"])
                    if not retriable:
                        break
                    attempt += 1
                    counts["retries"] += 1
                    await asyncio.sleep(spec["retry_backoff_ms"] / 1000 * 2 ** (attempt - 1))
            if self.cache is not None and answer is not None:
                self.cache.put(request, answer)
            done(row, answer)

        async def everything() -> None:
            await asyncio.gather(*(one(row, request) for row, request in enumerate(requests)))

        self.loop.run_until_complete(everything())
        return counts, latencies

    def _failed(self, message: str, last: bool, retriable: bool) -> tuple[bool, Any]:
        """Retry (a retriable failure with tries left), fail the batch (``fail_on_errors``), or pass on."""
        if retriable and not last:
            return True, None
        if self.spec["fail_on_errors"]:
            raise LookupError_(message + " (fail_on_errors is true)")
        return False, None


def parse_variables(text: str | None) -> list[str]:
    """``"a,b"`` → ``["a", "b"]`` (Dagger's comma-separated column lists)."""
    return [v.strip() for v in (text or "").split(",") if v.strip()]


def check_pattern(pattern: str, variables: list[str], where: str) -> None:
    """A ``%s`` pattern must take exactly its variables (``%%`` is a literal ``%``)."""
    try:
        pattern % tuple("x" for _ in variables)
    except (TypeError, ValueError) as exc:
        raise DaggerConfigError(
            f"{where}: pattern {pattern!r} does not take its {len(variables)} variable(s) {variables}: {exc} "
            "(use %s per variable and %% for a literal %)"
        ) from None


def as_text(value: Any) -> str:
    """A column value as Dagger puts it into a pattern (§7.4): Timestamp as ``yyyy-MM-dd HH:mm:ss`` UTC, structs
    and lists as JSON, maps as ``null``, booleans lowercase."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dict):
        return json.dumps(value, default=str)
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):  # an Arrow map arrives as (key, value) pairs
            return "null"
        return json.dumps(value, default=str)
    return str(value)


@dataclass
class OutputColumn:
    """One ``output_mapping`` entry with its Spark type and the converter of response values to it."""

    name: str
    path: str
    spark_type: Any
    field: Any = None  # the proto field typing it, or None (untyped: JSON text)


def output_columns(
    mapping: dict[str, str], proto: Any, retain: bool, where: str, known: dict[str, Any] | None = None
) -> list[OutputColumn]:
    """Type ``{column: path}`` through ``proto`` (the source's ``type`` or the Kafka sink's message); without one
    (``retain_response_type``), through the fields ``known`` gives, the others untyped."""
    from pyspark.sql.types import StringType

    from dagger.serde.types import field_type  # start-up: loads google, pyspark

    out = []
    for name, path in mapping.items():
        if proto is None:  # retain_response_type, no `type`: typed where known, else JSON text made a VARIANT
            found = (known or {}).get(name)
            out.append(
                OutputColumn(name, path, field_type(found), found) if found else OutputColumn(name, path, StringType())
            )
            continue
        found = proto.fields_by_name.get(name)
        if found is None:
            raise DaggerConfigError(
                f"{where}.output_mapping: {name!r} is not a field of {proto.full_name}, which types the response "
                f"(set `type` to the message that has it); fields: {', '.join(f.name for f in proto.fields)}"
            )
        out.append(OutputColumn(name, path, field_type(found), found))
    return out


def convert(value: Any, field_: Any) -> Any:
    """A JSON response value typed as ``field_`` (Dagger's "from post-processor" conversion, §7.3)."""
    from dagger.serde.types import is_map  # start-up: loads google, pyspark

    if field_ is None:  # untyped: the value as JSON text (made a VARIANT by the planner)
        return None if value is None else json.dumps(value, default=str)
    if is_map(field_):
        key_f, value_f = field_.message_type.fields_by_name["key"], field_.message_type.fields_by_name["value"]
        if isinstance(value, dict):
            return [(_single(k, key_f), _single(v, value_f)) for k, v in value.items()]
        if isinstance(value, list):
            return [
                (_single(e.get("key"), key_f), _single(e.get("value"), value_f)) for e in value if isinstance(e, dict)
            ]
        return []
    if field_.is_repeated:
        return [_single(v, field_) for v in value] if isinstance(value, list) else []
    return _single(value, field_)


def _single(value: Any, field_: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor

    from dagger.serde.types import DURATION, JSON_TYPES, TIMESTAMP, WRAPPERS  # start-up: loads google, pyspark

    kind = field_.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        name = field_.message_type.full_name
        if name == TIMESTAMP:
            if isinstance(value, dt.datetime):  # a database timestamp
                return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            if isinstance(value, str):
                try:
                    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
                except ValueError:
                    return None
            return None
        if name == DURATION:
            return None
        if name in JSON_TYPES:
            return None if value is None else json.dumps(value)
        if name in WRAPPERS:
            return None if value is None else _single(value, field_.message_type.fields_by_name["value"])
        if not isinstance(value, dict):
            return None
        return {f.name: convert(value.get(f.name), f) for f in field_.message_type.fields}
    if kind == FieldDescriptor.TYPE_ENUM:
        values = field_.enum_type.values
        if isinstance(value, bool):
            value = None
        if isinstance(value, (int, float)) and int(value) in field_.enum_type.values_by_number:
            return field_.enum_type.values_by_number[int(value)].name
        if isinstance(value, str) and value in field_.enum_type.values_by_name:
            return value
        return values[0].name
    if kind == FieldDescriptor.TYPE_BOOL:
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value) if value is not None else False
    if kind in (FieldDescriptor.TYPE_STRING,):
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    if kind == FieldDescriptor.TYPE_BYTES:
        return b"" if value is None else str(value).encode()
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        try:
            return float(value) if value is not None else 0.0
        except (TypeError, ValueError):
            return 0.0
    if isinstance(value, str):  # proto3 JSON writes 64-bit integers as strings: exact, not through a float
        try:
            return int(value)
        except ValueError:
            pass
    try:
        return int(float(value)) if value is not None else 0
    except (TypeError, ValueError):
        return 0


@dataclass
class Metrics:
    """Counters of one external source: Spark accumulators (summed on the driver) keyed by metric name, and the
    calls' response times."""

    name: str
    counters: dict[str, Any] = field(default_factory=dict)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    @classmethod
    def create(cls, spark: SparkSession, name: str) -> Metrics:
        context = spark.sparkContext
        return cls(name, {m: context.accumulator(0) for m in METRICS}, LatencyHistogram.create(spark))

    def add(self, counts: dict[str, int], latencies_ms: Iterable[float]) -> None:
        for key, n in counts.items():
            if n:
                self.counters[key].add(n)
        self.latency.add(latencies_ms)

    def values(self) -> dict[str, int]:
        """Driver side: every counter's total."""
        return {k: a.value for k, a in self.counters.items()}

    def histogram(self) -> dict[str, int]:
        """Driver side: calls per latency bucket (``<=5ms`` … ``>5000ms``)."""
        return self.latency.labelled()
