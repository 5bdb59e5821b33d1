"""Event-time-aligned admission for Kafka streams: no partition is read far ahead of the others in event time.

Spark keeps one watermark per query, the maximum event time seen in earlier micro-batches less
``FLINK_WATERMARK_DELAY_MS``, so a micro-batch that reads one partition an hour ahead of another makes the other
partition's next records late, and windows drop them. Flink's Kafka source keeps a watermark per partition and
takes the minimum; this module gives the same result by choosing what each micro-batch reads:

* the **progress** of a partition is the event time of its next unread record (or, for a partition that has been
  read to its end, of its last record);
* a partition may be read up to the records whose event time is at most the lowest progress of the *other*
  active partitions plus the watermark delay. The slowest partition is never held back by itself, so every
  micro-batch moves the slowest one forward and the job never stalls on its own;
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
                    "fetch.wait.max.ms": "10",
                    "max.partition.fetch.bytes": "65536",  # a probe needs one record; Kafka sends at least one
                    "queued.max.messages.kbytes": "4096",
                }
            )
            self._consumer = Consumer(conf)
        return self._consumer

    def _decode(self, values: list[bytes | None]) -> list[int | None]:
        if self._decoder is None:
            from dataclasses import replace

            from dagger.sources.kafka import _decoder, rowtime_field_name

            only_rowtime = replace(self.spec, fields=[rowtime_field_name(self.spec)])
            self._decoder = _decoder(only_rowtime)
        result = self._decoder.decode(values)
        times = result.batch.column(self.spec.rowtime).cast("int64").to_pylist()
        valid = result.batch.column(len(result.batch.schema) - 2).to_pylist()
        return [t if ok else None for t, ok in zip(times, valid, strict=True)]

    def times(self, wanted: dict[str, int]) -> dict[str, int | None]:
        """The event time of the record at each ``{"topic:partition": offset}`` (the first record at or after it,
        when the offset holds none); ``None`` when it cannot be read."""
        from confluent_kafka import KafkaError, TopicPartition

        from dagger.sources.kafka import _split

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
        consumer.assign([TopicPartition(*_split(k), o) for k, o in todo.items()])
        found: dict[str, bytes | None] = {}
        done: set[str] = set()
        deadline = time.monotonic() + _FETCH_TIMEOUT
        while len(done) < len(todo) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=max(64, 4 * len(todo)), timeout=0.1):
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
        ``FLINK_WATERMARK_DELAY_MS``: how far a partition may run ahead of the slowest other one.
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
        """``ends`` (what the read limit allows) clipped by event time.

        ``latest`` are the partitions' end offsets; ``finished`` says that nothing more will arrive in this run
        (``--available-now``), so partitions read to their end are idle at once.
        """
        now = self._clock()
        for key, high in latest.items():
            if self._latest.get(key) != high:
                self._latest[key] = high
                self._grew[key] = now
        backlog = [k for k in ends if starts[k] < latest.get(k, starts[k])]
        if not backlog:
            return ends
        caught_up = [
            k
            for k in latest
            if k not in backlog and starts.get(k, 0) > 0 and not finished and now - self._grew[k] < self.idle_timeout
        ]
        heads = self.probe.times({k: starts[k] for k in backlog})
        heads.update(self.probe.times({k: starts[k] - 1 for k in caught_up}))
        progress = {k: t for k, t in heads.items() if t is not None}
        if len(progress) < 2:
            return ends  # nobody to align with
        ordered = sorted(progress.items(), key=lambda item: item[1])
        (slowest, low), (_, second) = ordered[0], ordered[1]
        bounds = {k: (second if k == slowest else low) + self.delay_us for k in backlog}
        clipped = dict(ends)
        self._bisect(starts, clipped, bounds)
        held = {k for k in backlog if clipped[k] < ends[k]}
        for key in sorted(held - self._held):
            log.info(
                "stream '%s': %s is ahead in event time; reading it no further than %s µs past %s until the "
                "slower partitions catch up (or are idle for %.0f s)",
                self.table,
                key,
                self.delay_us,
                slowest,
                self.idle_timeout,
            )
        self._held = held
        return clipped

    def _bisect(self, starts: dict[str, int], ends: dict[str, int], bounds: dict[str, int]) -> None:
        """Per partition, the largest end whose last record is within its bound (all partitions per round)."""
        last = self.probe.times({k: ends[k] - 1 for k in bounds if ends[k] > starts[k]})
        searching = {}
        for key, t in last.items():
            if t is not None and t > bounds[key]:
                searching[key] = [starts[key], ends[key] - 1]  # the cut lies in [lo, hi): records lo.. are candidates
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
