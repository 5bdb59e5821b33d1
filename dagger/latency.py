"""Response-time histograms of calls made on the executors (external lookups, Longbow's Bigtable calls).

Tasks add each call's milliseconds to Spark accumulators, one per bucket plus the sum; the driver reads them
and the telemetry exporters publish them as Prometheus histograms (Dagger's ``*_response_time`` metrics).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: upper bounds (ms) of the buckets; the last bucket is everything slower
LATENCY_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


@dataclass
class LatencyHistogram:
    """Calls per bucket (upper bounds ``bounds_ms``, :data:`LATENCY_BUCKETS_MS` by default) and their summed
    milliseconds, as Spark accumulators."""

    counts: list[Any] = field(default_factory=list)  # one accumulator per bucket, and one for slower calls
    total_ms: Any = None
    bounds_ms: tuple[int, ...] = LATENCY_BUCKETS_MS

    @classmethod
    def create(cls, spark: SparkSession, bounds_ms: tuple[int, ...] = LATENCY_BUCKETS_MS) -> LatencyHistogram:
        context = spark.sparkContext
        return cls([context.accumulator(0) for _ in range(len(bounds_ms) + 1)], context.accumulator(0.0), bounds_ms)

    def add(self, latencies_ms: Iterable[float]) -> None:
        """Executor side: count each call's milliseconds in its bucket."""
        bounds = self.bounds_ms
        buckets = [0] * (len(bounds) + 1)
        total = 0.0
        for ms in latencies_ms:
            buckets[bisect.bisect_left(bounds, ms)] += 1  # the first bucket whose bound is >= ms
            total += ms
        if total:
            self.total_ms.add(total)
        for accumulator, n in zip(self.counts, buckets, strict=True):
            if n:
                accumulator.add(n)

    def labelled(self) -> dict[str, int]:
        """Driver side: calls per bucket, labelled ``<=5ms`` … ``>5000ms``."""
        labels = [f"<={b}ms" for b in self.bounds_ms] + [f">{self.bounds_ms[-1]}ms"]
        return {label: a.value for label, a in zip(labels, self.counts, strict=True)}

    def prometheus(self) -> tuple[list[tuple[float, int]], float]:
        """Driver side: cumulative ``(upper bound in seconds, calls)`` pairs ending with ``+Inf``, and the sum in
        seconds: a Prometheus histogram's samples."""
        running, buckets = 0, []
        for bound, accumulator in zip((*self.bounds_ms, float("inf")), self.counts, strict=True):
            running += accumulator.value
            buckets.append((bound / 1000.0, running))
        return buckets, self.total_ms.value / 1000.0
