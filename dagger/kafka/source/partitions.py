"""What one Spark task reads of a Kafka stream: topic-partition offset ranges, fetched as Arrow chunks
(:mod:`dagger.kafka.source.fetcher`) and decoded into Arrow record batches (ptars), invalid records handled by
the stream's policy. Runs on executors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from dagger.dead_letter import DeadLetterSpec
from dagger.errors import InvalidRecordError, SourceError
from dagger.kafka.source.spec import (
    READ_FETCH_WAIT_MS,
    KafkaSourceSpec,
    decoder_for,
)

if TYPE_CHECKING:
    pass


log = logging.getLogger(__name__)

#: once the brokers have answered, how long one request waits for them before the job says they do not answer
#: (and goes on waiting, up to SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS)
ANSWER_SECONDS = 5.0


class KafkaPartition(InputPartition):
    """One Kafka topic-partition offset range ``[start, end)`` read by one Spark task. Offsets may have gaps
    (compacted topics, transaction markers, aborted transactions' records): a range ends at its end offset or at
    the partition's end, whichever comes first."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaRanges(InputPartition):
    """The offset ranges one Spark task of a micro-batch reads, one after the other: one range, or several small
    ones (:func:`tasks`)."""

    def __init__(self, ranges: list[KafkaPartition]):
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges


def tasks(ranges: list[KafkaPartition], records_per_task: int) -> list[KafkaRanges]:
    """``ranges`` spread over as few tasks as give each about ``records_per_task`` records, at most one task per
    range (``records_per_task`` 0: one each). The largest ranges are placed first, each on the task with the
    fewest records so far."""
    total = sum(r.end - r.start for r in ranges)
    count = len(ranges) if records_per_task <= 0 else min(len(ranges), max(1, -(-total // records_per_task)))
    if count >= len(ranges):
        return [KafkaRanges([r]) for r in ranges]
    groups: list[list[KafkaPartition]] = [[] for _ in range(count)]
    loads = [0] * count
    for r in sorted(ranges, key=lambda r: r.start - r.end):
        least = loads.index(min(loads))
        groups[least].append(r)
        loads[least] += r.end - r.start
    return [KafkaRanges(sorted(g, key=lambda r: (r.topic, r.partition))) for g in groups]


#: ranges of one task whose readers are opened ahead of the one being read, so that their first fetches overlap
READ_AHEAD = 4


def read_ranges(spec: KafkaSourceSpec, ranges: list[KafkaPartition]) -> Iterator[Any]:
    """Read ``ranges`` one after the other, each range's reader opened while up to :data:`READ_AHEAD` - 1 earlier
    ones are read (opening connects and fetches: done one by one, a task of many small ranges waited for each)."""
    opened: dict[int, Any] = {}
    try:
        for index, part in enumerate(ranges):
            for ahead in range(index, min(index + READ_AHEAD, len(ranges))):
                if ahead not in opened:
                    opened[ahead] = open_range(spec, ranges[ahead])
            yield from read_partition(spec, part, opened.pop(index))
    finally:
        for fetcher in opened.values():
            fetcher.close()


def _reader_config(spec: KafkaSourceSpec) -> dict[str, str]:
    conf = dict(spec.client_config)
    conf.update(
        {
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "true",
            "fetch.wait.max.ms": READ_FETCH_WAIT_MS,
        }
    )
    conf.setdefault("queued.max.messages.kbytes", "262144")
    # librdkafka stops prefetching at 100k queued records by default, which halves a reader's speed on a backlog
    # (139k -> 263k records/s for one partition here); the kbytes cap above still bounds the memory
    conf.setdefault("queued.min.messages", "1000000")
    return conf


def open_range(spec: KafkaSourceSpec, part: KafkaPartition, start: int | None = None) -> Any:
    """A reader of ``part``'s partition from ``start`` (default the range's start); fetching begins at once."""
    from dagger.kafka.source.fetcher import FetchError, open_fetcher  # start-up: loads numpy, pyarrow

    try:
        return open_fetcher(_reader_config(spec), part.topic, part.partition, part.start if start is None else start)
    except FetchError as exc:
        raise SourceError(f"stream '{spec.table}': cannot read {part.topic}[{part.partition}]: {exc}") from exc


def read_partition(spec: KafkaSourceSpec, part: KafkaPartition, fetcher: Any = None) -> Iterator[Any]:
    """Read one offset range (with ``fetcher``, a reader :func:`open_range` opened for it, which this closes),
    decode it and apply the invalid-record policy."""
    from dagger.kafka.source.fetcher import FetchError  # start-up: loads numpy, pyarrow

    decoder = decoder_for(spec)
    if fetcher is None:
        fetcher = open_range(spec, part)
    dead_letters = None
    if spec.invalid_policy == "dead-letter" and spec.dead_letter:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or -1) if context else -1
        dead_letters = DeadLetterSpec(**spec.dead_letter).writer("source", spec.table, batch_id, part.partition)
    window = None
    if spec.time_range is not None:
        low, high = spec.time_range
        window = (low if low is not None else -(2**63), high if high is not None else 2**63)
    try:
        position = part.start
        last_progress = time.monotonic()
        waiting = False  # the brokers do not answer now (logged once)
        brokers = spec.client_config["bootstrap.servers"]
        while position < part.end:
            want = min(spec.read_batch_size, part.end - position)
            try:
                chunk = fetcher.fetch(want, 1.0, part.end)
            except FetchError as exc:
                raise InvalidRecordError(
                    f"stream '{spec.table}': reading {part.topic}[{part.partition}] at offset {position} failed: {exc}"
                ) from exc
            if len(chunk):
                position = int(chunk.offsets[-1]) + 1
                last_progress = time.monotonic()
                if waiting:
                    waiting = False
                    log.warning("stream '%s': the brokers %s answer again", spec.table, brokers)
                if window is not None:  # inside the offset range, outside the time range (timestamps out of order)
                    chunk = chunk.take((chunk.timestamps >= window[0]) & (chunk.timestamps < window[1]))
                if len(chunk):
                    yield _decode_chunk(spec, decoder, part, chunk, dead_letters)
                if chunk.eof:
                    break  # the partition's end: the range's last offsets hold no records (see below)
            elif chunk.eof:
                break  # the partition ends before the range does: its last offsets hold no records (compaction,
                # transaction markers, aborted records under read_committed); nothing more will come
            elif not waiting and time.monotonic() - last_progress > ANSWER_SECONDS:
                waiting = True  # a task waiting in silence for minutes is what an operator must not meet
                log.warning(
                    "stream '%s': the brokers %s do not answer: no records from %s[%d] for %.0f s while offsets "
                    "%d..%d are expected; waiting up to %.0f s (SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS)",
                    spec.table,
                    brokers,
                    part.topic,
                    part.partition,
                    ANSWER_SECONDS,
                    position,
                    part.end - 1,
                    spec.unreachable_timeout_ms / 1000,
                )
            elif time.monotonic() - last_progress > spec.unreachable_timeout_ms / 1000:
                raise SourceError(
                    f"stream '{spec.table}': no records from {part.topic}[{part.partition}] on "
                    f"{spec.client_config['bootstrap.servers']} for {spec.unreachable_timeout_ms / 1000:.0f} s "
                    f"(SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS) while offsets {position}..{part.end - 1} were expected. "
                    "Nothing was lost: a restart resumes from the checkpoint"
                )
        if dead_letters is not None:
            dead_letters.flush()
    finally:
        fetcher.close()


def _decode_chunk(spec: KafkaSourceSpec, decoder: Any, part: KafkaPartition, chunk: Any, dead_letters: Any) -> Any:
    if spec.decodes_in_jvm:  # decoded in the JVM: the coordinates go along for its errors
        from dagger.formats.avro.decode import UnknownSchemaError  # start-up: loads numpy, pyarrow

        try:
            result = decoder.decode(chunk.values, (part.topic, part.partition, chunk.offsets))
        except UnknownSchemaError as exc:
            raise SourceError(f"stream '{spec.table}': {part.topic}[{part.partition}]: {exc}") from None
    else:
        result = decoder.decode(chunk.values)
    if result.invalid:
        if spec.invalid_policy == "fail":
            offset = int(chunk.offsets[result.invalid[0]])
            raise InvalidRecordError(
                f"stream '{spec.table}': record at topic {part.topic} partition {part.partition} offset {offset} "
                f"cannot be decoded: {result.reasons[0]}. Set SOURCE_KAFKA_INVALID_RECORD_POLICY to 'drop' or "
                f"'dead-letter' to keep the job running past undecodable records."
            )
        if dead_letters is not None:
            for index, reason in zip(result.invalid, result.reasons, strict=True):
                coordinates = {"topic": part.topic, "partition": part.partition, "offset": int(chunk.offsets[index])}
                coordinates["message"] = spec.records.get("message") or ""  # the message a protobuf record was read as
                dead_letters.write_record(chunk.values[index].as_py(), chunk.keys[index].as_py(), reason, coordinates)
    return result.batch
