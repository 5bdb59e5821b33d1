"""Kafka records held in memory, read by the Kafka source's own code: ``dagger test`` feeds a case's records
through the same decoding, invalid-record policy and dead letters as records fetched from a broker.

:class:`MemoryFetcher` stands where :func:`dagger.sources.kafka.fetcher.open_fetcher`'s reader stands in
:func:`dagger.sources.kafka.partitions.read_partition` (runs on the executors): it hands out a partition's records
as the :class:`~dagger.sources.kafka.fetcher.Chunk` objects the broker's reader makes, with their offsets, keys
and timestamps. Nothing else of the read changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dagger.sources.kafka.fetcher import Chunk


@dataclass(frozen=True)
class MemoryRecord:
    """One record as a broker would hold it: its bytes, where it sits and when it was written."""

    value: bytes | None
    key: bytes | None = None
    offset: int = 0
    timestamp_ms: int = -1  # -1: none, as librdkafka says


class MemoryFetcher:
    """A partition's records from memory, a fetch at a time (the :class:`~dagger.sources.kafka.fetcher.Fetcher`
    protocol). ``records`` are the partition's, in offset order; reading starts at ``start``."""

    def __init__(self, records: list[MemoryRecord], start: int = 0):
        offsets = [r.offset for r in records]
        if offsets != sorted(set(offsets)):
            raise ValueError(f"a partition's records need increasing offsets, not {offsets}")
        self._records = [r for r in records if r.offset >= start]
        self._next = 0

    def fetch(self, max_records: int, timeout_s: float, end: int) -> Chunk:  # noqa: ARG002 - nothing to wait for
        """At most ``max_records`` records with offsets below ``end``; ``eof`` once the records run out."""
        taken = []
        while self._next < len(self._records) and len(taken) < max_records:
            record = self._records[self._next]
            if record.offset >= end:
                break
            taken.append(record)
            self._next += 1
        return Chunk(
            pa.array([r.value for r in taken], pa.binary()),
            pa.array([r.key for r in taken], pa.binary()),
            np.array([r.offset for r in taken], dtype=np.int64),
            np.array([r.timestamp_ms for r in taken], dtype=np.int64),
            self._next >= len(self._records),
        )

    def close(self) -> None:
        """Nothing to leave: the records stay with their owner."""
