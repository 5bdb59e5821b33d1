"""Event-time-aligned admission for Kafka streams: no partition is read far ahead of the others in event time.

Spark keeps one watermark per query, the maximum event time seen in earlier micro-batches less
``FLINK_WATERMARK_DELAY_MS``, so a micro-batch that reads one partition an hour ahead of another makes the other
partition's next records late, and windows drop them. Flink's Kafka source keeps a watermark per partition and
takes the minimum; this module gives the same result by choosing what each micro-batch reads:

* after a micro-batch, Spark's watermark is the latest event time it read less the delay; so each micro-batch
  reads, in every partition, only the records at most the delay past the **frontier**: the earliest event time a
  partition may still deliver, which is its next unread record when the batch leaves records in it, or its last
  record when it is read to its end and may still receive more. Partitions that move together in event time are
  read whole, with no probe at all when nothing can arrive late (an ``--available-now`` run within the read
  limit); a partition far ahead waits. If the read limit leaves the slowest partition nothing to read, it alone
  moves, up to the next partition's frontier, so a job never stalls on its own;
* a partition is **idle**, and holds nobody back, once it has been read to its end and has received nothing new
  for ``SPARK_PARTITION_IDLE_TIMEOUT_MS`` (in an ``--available-now`` run, as soon as it reaches its target).

Event times are read on the driver with single-record fetches (one batched fetch per round for all partitions,
only the rowtime field decoded), cached by offset; the cut inside a partition's range is found by bisection, so
it assumes event time grows with the offset within a partition, up to the watermark delay, as Flink's per-partition
watermarks do. Records whose event time cannot be read (undecodable, tombstones) do not hold anything back.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from dagger.kafka.source.spec import FETCH_WAIT_MS, split_offset_key
from dagger.librdkafka_logs import quiet

log = logging.getLogger(__name__)

_CACHE_SIZE = 100_000
_FETCH_TIMEOUT = 15.0


class EventTimeProbe:
    """Reads the event time (µs since the epoch) of the records at given offsets, on the driver."""

    def __init__(self, spec: Any):
        self.spec = spec
        self._consumer = None
        self._decoder = None
        self._cache: OrderedDict[tuple[str, int], int | None] = OrderedDict()
        self.fetches = 0  # batched fetch rounds, for tests and logs

    def _open(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = dict(self.spec.client_config)
            conf.update(
                {
                    "enable.auto.commit": "false",
                    "enable.partition.eof": "true",
                    "fetch.wait.max.ms": FETCH_WAIT_MS,
                    "max.partition.fetch.bytes": "65536",  # a probe needs one record; Kafka sends at least one
                    "queued.max.messages.kbytes": "4096",
                    # librdkafka pauses fetching for 1 s once its queue is over that threshold: ~1 s per probe round
                    "fetch.queue.backoff.ms": "0",
                }
            )
            self._consumer = Consumer(quiet(conf))
        return self._consumer

    def _decode(self, values: list[bytes | None]) -> list[int | None]:
        if self._decoder is None:  # a few records: read here, even where the JVM decodes the stream
            self._decoder = self.spec.format.rowtime_reader(self.spec.records, self.spec.rowtime)
        return self._decoder(values)

    def times(self, wanted: dict[str, int]) -> dict[str, int | None]:
        """The event time of the record at each ``{"topic:partition": offset}`` (the first record at or after it,
        when the offset holds none); ``None`` when it cannot be read."""
        from confluent_kafka import KafkaError, TopicPartition

        out: dict[str, int | None] = {}
        todo = {}
        for key, offset in wanted.items():
            cached = self._cache.get((key, offset), ...)
            if cached is ...:
                todo[key] = offset
            else:
                out[key] = cached
        if not todo:
            return out
        self.fetches += 1
        consumer = self._open()
        consumer.assign([TopicPartition(*split_offset_key(k), o) for k, o in todo.items()])
        found: dict[str, bytes | None] = {}
        done: set[str] = set()
        deadline = time.monotonic() + _FETCH_TIMEOUT
        while len(done) < len(todo) and time.monotonic() < deadline:
            # ask for as many as are missing: consume() returns once it has them, or waits out its timeout
            for message in consumer.consume(num_messages=len(todo) - len(done), timeout=0.1):
                key = f"{message.topic()}:{message.partition()}"
                if key not in todo or key in done:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done.add(key)  # nothing at or after the offset
                    continue
                if message.offset() >= todo[key]:
                    found[key] = message.value()
                    done.add(key)
        consumer.unassign()
        keys = list(found)
        decoded = self._decode([found[k] for k in keys]) if keys else []
        times = dict(zip(keys, decoded, strict=True))
        for key, offset in todo.items():
            out[key] = times.get(key)
            if key in done:  # a probe that timed out is not remembered
                self._cache[(key, offset)] = out[key]
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class EventTimeAligner:
    """Clips a micro-batch's end offsets so that no partition runs ahead of the others in event time.

    Parameters
    ----------
    probe:
        Reads the event time of a record by offset (:class:`EventTimeProbe`).
    delay_ms:
        ``FLINK_WATERMARK_DELAY_MS``: how far the records of a micro-batch may be ahead of the slowest partition.
    idle_timeout_ms:
        How long a partition read to its end may receive nothing before it stops holding others back.
    table:
        The stream, for log messages.
    """

    def __init__(self, probe: Any, delay_ms: int, idle_timeout_ms: int, table: str, clock: Any = time.monotonic):
        self.probe = probe
        self.delay_us = delay_ms * 1000
        self.idle_timeout = idle_timeout_ms / 1000
        self.table = table
        self._clock = clock
        self._latest: dict[str, int] = {}
        self._grew: dict[str, float] = {}
        self._held: set[str] = set()

    def clip(
        self, starts: dict[str, int], ends: dict[str, int], latest: dict[str, int], finished: bool = False
    ) -> dict[str, int]:
        """``ends`` (what the read limit allows) clipped to the event-time frontier.

        After the micro-batch, Spark's watermark is the latest event time read less the delay. Every record this
        batch reads is therefore kept at most the delay past the **frontier**: the earliest of each partition's
        next unread record (for a partition the batch leaves records in) and last record (for a partition read to
        its end that may still receive more: not idle, and not finished). ``latest`` are the partitions' end
        offsets; ``finished`` says nothing more arrives in this run (``--available-now``).
        """
        now = self._clock()
        for key, high in latest.items():
            if self._latest.get(key) != high:
                self._latest[key] = high
                self._grew[key] = now
        reading = [k for k in ends if ends[k] > starts.get(k, ends[k])]
        if not reading:
            return ends
        limits = {k: ends[k] for k in ends if ends[k] < latest.get(k, ends[k])}  # next unread record
        live = {
            k: high - 1
            for k, high in latest.items()
            if k not in limits and high > 0 and not finished and now - self._grew[k] < self.idle_timeout
        }  # last record of a partition read to its end that may still receive older records than the others
        if not limits and not live:
            return ends  # nothing this batch leaves behind can be older than what it reads
        known = {k: t for k, t in self.probe.times({**limits, **live}).items() if t is not None}
        if not known:
            return ends
        frontier = min(known.values()) + self.delay_us
        clipped = dict(ends)
        self._bisect(starts, clipped, dict.fromkeys(reading, frontier))
        if all(clipped[k] <= starts.get(k, 0) for k in reading):
            # the read limit left the slowest partition nothing to read: it alone moves, up to the next one
            slowest = min(known, key=known.get)
            others = [t for k, t in known.items() if k != slowest]
            budget = sum(ends[k] - starts.get(k, 0) for k in reading)
            clipped[slowest] = min(latest[slowest], starts.get(slowest, 0) + budget)
            bound = (min(others) + self.delay_us) if others else None
            if bound is not None:
                self._bisect(starts, clipped, {slowest: bound})
        self._log_held(starts, ends, clipped, min(known, key=known.get))
        return clipped

    def _log_held(self, starts: dict[str, int], ends: dict[str, int], clipped: dict[str, int], slowest: str) -> None:
        held = {k for k in ends if clipped[k] < ends[k]}
        for key in sorted(held - self._held):
            log.info(
                "stream '%s': %s is ahead in event time; it is read no further than %.0f s past %s until that "
                "catches up or is idle for %.0f s",
                self.table,
                key,
                self.delay_us / 1e6,
                slowest,
                self.idle_timeout,
            )
        self._held = held

    def _bisect(self, starts: dict[str, int], ends: dict[str, int], bounds: dict[str, int]) -> None:
        """Per partition, the largest end whose last record is within its bound (all partitions per round)."""
        last = self.probe.times({k: ends[k] - 1 for k in bounds if ends[k] > starts.get(k, 0)})
        searching = {}
        for key, t in last.items():
            if t is not None and t > bounds[key]:
                searching[key] = [starts.get(key, 0), ends[key] - 1]  # the first record past the bound is in [lo, hi]
        while searching:
            mids = {k: (lo + hi) // 2 for k, (lo, hi) in searching.items()}
            times = self.probe.times(mids)
            for key, mid in mids.items():
                lo, hi = searching[key]
                t = times.get(key)
                if t is None or t <= bounds[key]:
                    lo = mid + 1
                else:
                    hi = mid
                searching[key] = [lo, hi]
            for key in [k for k, (lo, hi) in searching.items() if lo >= hi]:
                ends[key] = searching.pop(key)[0]
