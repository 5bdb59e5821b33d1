"""Caches that live as long as a Python worker: bounded, and keyed by what their values are built from.

Spark reuses a Python worker for many tasks, and in one Spark session (a notebook, the tests, a cluster's
executors) for many jobs. A worker therefore keeps decoders, encoders, clients and lookup answers between
tasks, which is where much of the speed comes from. Two rules keep that safe:

* a value is cached under a **digest of everything it is built from** (:func:`content_key`: the descriptor set's
  bytes, the message name, a lookup source's whole spec …), never under a label such as ``HTTP.0`` that two jobs
  may both use;
* every cache is **bounded**: :class:`BuiltCache` keeps the most recently used entries (closing what it
  drops, for clients), :class:`AnswerCache` also forgets answers once their time to live has passed, so memory
  stays flat however many distinct keys a job sees.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def content_key(*parts: Any) -> str:
    """A digest of ``parts`` (strings, numbers, lists, dicts; compared by content)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class BuiltCache(Generic[V]):
    """Values built on first use and kept for the worker's life, at most ``max_entries`` (least recently used
    dropped first; ``on_evict`` releases a dropped value, e.g. closes a client)."""

    def __init__(self, max_entries: int, on_evict: Callable[[V], None] | None = None):
        self.max_entries = max_entries
        self.on_evict = on_evict
        self._entries: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = build()
        self._entries[key] = value
        while len(self._entries) > self.max_entries:
            _, dropped = self._entries.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(dropped)
        return value

    def __len__(self) -> int:
        return len(self._entries)


class AnswerCache:
    """Answers kept for ``ttl_seconds``, at most ``max_entries`` (the oldest dropped first). Expired answers are
    forgotten as newer ones arrive, so the cache never holds more than one time-to-live's worth of keys."""

    def __init__(self, ttl_seconds: float, max_entries: int = 100_000, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()  # insertion = expiry order

    def get(self, key: Hashable) -> Any:
        """The answer for ``key``, or ``None`` when there is none or it has expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: Hashable, answer: Any) -> None:
        now = self._clock()
        self._entries.pop(key, None)
        self._entries[key] = (now + self.ttl, answer)
        while self._entries:  # every answer has the same time to live: the oldest expire first
            oldest = next(iter(self._entries.values()))
            if oldest[0] > now and len(self._entries) <= self.max_entries:
                break
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
