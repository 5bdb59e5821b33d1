"""DARTS (Dagger Refer-Table Service): small reference data read from JSON files and cached per executor.

``DartGet(collection, key, refreshHours[, default])`` reads ``<base>/dart-get/<collection>``, a JSON object;
``DartContains(collection, value[, regex][, refreshHours])`` reads ``<base>/dart-contains/<collection>``, a JSON
object ``{"data": [...]}``. ``<base>`` is ``UDF_DART_BASE_URL`` — a local directory, an ``http(s)://`` prefix
or ``gs://bucket/prefix`` (needs the ``gcs`` extra) — or ``gs://UDF_DART_GCS_BUCKET_ID`` as in Dagger.
Each executor process keeps a file for ``refreshHours`` (default 1) before reading it again.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pyarrow as pa

from udfs.declare import Example, UdfContext, arrow_function, macro, rows

COUNTERS = ("dart_fetch_success", "dart_fetch_failure", "dart_cache_hit", "dart_cache_miss")

_cache: dict[str, tuple[float, Any]] = {}
_lock = threading.Lock()


def read_location(url: str) -> bytes:
    """The bytes at a local path, ``file://``, ``http(s)://`` or ``gs://`` URL."""
    if url.startswith(("http://", "https://")):
        import requests

        response = requests.get(url, timeout=30)
        response.raise_for_status()
        return response.content
    if url.startswith("gs://"):
        try:
            from google.cloud import storage
        except ImportError:
            raise RuntimeError(
                f"reading {url} needs google-cloud-storage: pip install 'dagger-on-spark[gcs]'"
            ) from None
        bucket, _, name = url[5:].partition("/")
        return storage.Client().bucket(bucket).blob(name).download_as_bytes()
    with open(url.removeprefix("file://"), "rb") as handle:
        return handle.read()


def _count(context: UdfContext, name: str) -> None:
    counter = context.counters.get(name)
    if counter is not None:
        counter.add(1)


def load(context: UdfContext, kind: str, collection: str, refresh_hours: float) -> Any:
    """The parsed file of a collection, from this process's cache while it is younger than ``refresh_hours``."""
    if not context.dart_base:
        raise ValueError(f"{kind}: no DARTS location; set UDF_DART_BASE_URL (or UDF_DART_GCS_BUCKET_ID)")
    url = f"{context.dart_base.rstrip('/')}/{'dart-get' if kind == 'DartGet' else 'dart-contains'}/{collection}"
    now = time.monotonic()
    with _lock:
        cached = _cache.get(url)
        if cached is not None and now - cached[0] < refresh_hours * 3600 and cached[1]:
            _count(context, "dart_cache_hit")
            return cached[1]
        _count(context, "dart_cache_miss")
        try:
            data = json.loads(read_location(url))
        except Exception as exc:
            _count(context, "dart_fetch_failure")
            raise ValueError(f"{kind}: cannot read collection {collection!r} at {url}: {exc}") from None
        _count(context, "dart_fetch_success")
        _cache[url] = (now, data)
        return data


@arrow_function(
    "__DartGet",
    "collection STRING, key STRING, refresh_hours DOUBLE, fallback STRING, has_default BOOLEAN",
    "STRING",
    context=True,
)
def dart_get_worker(context: UdfContext):  # noqa: ANN201
    """DartGet's worker."""

    def run(collection, key, refresh, fallback, has_default):  # noqa: ANN001, ANN202
        out = []
        for name, k, hours, default, defaulted in rows(collection, key, refresh, fallback, has_default):
            if name is None or k is None:
                out.append(None)
                continue
            data = load(context, "DartGet", name, 1.0 if hours is None else hours)
            if k in data:
                value = data[k]
                out.append(value if isinstance(value, str) or value is None else json.dumps(value))
            elif defaulted:
                out.append(default)
            else:
                raise KeyError(f"DartGet: key {k!r} does not exist in collection {name!r} (give a default)")
        return pa.array(out, pa.string())

    return run


@macro(
    "DartGet",
    "DartGet(collection STRING, key STRING, refresh_hours INT[, default STRING]) -> STRING",
    python=True,
    examples=[
        Example("SELECT DartGet('areas.json', 'jakarta', 1)", [("DKI",)]),
        Example("SELECT DartGet('areas.json', 'nowhere', 1, 'unknown')", [("unknown",)]),
    ],
)
def dart_get(args: list) -> str:
    """The value of ``key`` in a DARTS JSON object; a missing key is an error unless a default is given."""
    if len(args) not in (3, 4):
        raise ValueError(f"DartGet takes (collection, key, refreshHours[, default]), got {len(args)} argument(s)")
    collection, key, hours, *rest = [a.sql(dialect="spark") for a in args]
    default = rest[0] if rest else "NULL"
    return (
        f"__DartGet({collection}, CAST({key} AS STRING), CAST({hours} AS DOUBLE), CAST({default} AS STRING), "
        f"{'true' if rest else 'false'})"
    )


@arrow_function(
    "__DartContains",
    "collection STRING, value STRING, pattern STRING, refresh_hours DOUBLE",
    "BOOLEAN",
    context=True,
)
def dart_contains_worker(context: UdfContext):  # noqa: ANN201
    """DartContains' worker."""

    def run(collection, value, pattern, refresh):  # noqa: ANN001, ANN202
        out = []
        for name, v, regex, hours in rows(collection, value, pattern, refresh):
            if name is None or v is None:
                out.append(None)
                continue
            items = load(context, "DartContains", name, 1.0 if hours is None else hours).get("data", [])
            if regex is None:
                out.append(v in items)
            else:  # Dagger matches String.format(regex, element) against the value
                out.append(any(re.fullmatch(regex.replace("%s", str(item)), v) for item in items))
        return pa.array(out, pa.bool_())

    return run


@macro(
    "DartContains",
    "DartContains(collection STRING, value STRING[, regex STRING][, refresh_hours INT]) -> BOOLEAN",
    python=True,
    examples=[
        Example("SELECT DartContains('cities.json', 'bandung'), DartContains('cities.json', 'paris')", [(True, False)]),
        Example("SELECT DartContains('cities.json', 'city-bandung-2', 'city-%s-\\\\d')", [(True,)]),
    ],
    notes="The regex form formats the pattern with each element (``%s``) and matches the whole value, as Java's "
    "``String.matches`` does.",
)
def dart_contains(args: list) -> str:
    """Whether ``value`` is in a DARTS list (``{"data": [...]}``), or matches ``regex`` formatted with one of its
    elements."""
    from sqlglot import exp

    if len(args) not in (2, 3, 4):
        raise ValueError(f"DartContains takes (collection, value[, regex][, refreshHours]), got {len(args)}")
    collection, value = (a.sql(dialect="spark") for a in args[:2])
    regex, hours = "NULL", "1"
    rest = args[2:]
    if len(rest) == 2:
        regex, hours = (a.sql(dialect="spark") for a in rest)
    elif len(rest) == 1:
        if isinstance(rest[0], exp.Literal) and rest[0].is_string:
            regex = rest[0].sql(dialect="spark")
        else:
            hours = rest[0].sql(dialect="spark")
    return f"__DartContains({collection}, CAST({value} AS STRING), CAST({regex} AS STRING), CAST({hours} AS DOUBLE))"
