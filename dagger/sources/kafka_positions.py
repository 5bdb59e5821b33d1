"""Where a Kafka stream starts and stops: group offsets, earliest, latest, a timestamp, explicit offsets.

Per stream (Spark's Kafka option names, as config keys):

``SOURCE_KAFKA_STARTING_OFFSETS``
    ``group`` (default: the consumer group's committed offsets, else ``AUTO_OFFSET_RESET``), ``earliest``,
    ``latest``, or JSON ``{"topic": {"0": 42, "1": -2}}`` (``-2`` earliest, ``-1`` latest; partitions left
    out start at earliest).
``SOURCE_KAFKA_STARTING_TIMESTAMP``
    The first record at or after this instant (ISO-8601 or epoch ms), per partition.
``SOURCE_KAFKA_ENDING_OFFSETS`` / ``SOURCE_KAFKA_ENDING_TIMESTAMP``
    Makes the stream bounded: ``latest`` (the end when the job starts), JSON offsets (exclusive), or the
    first record at or after an instant (exclusive).

**Timestamp seeks are verified.** The broker's ``ListOffsets`` answer (``offsets_for_times``) is checked by
reading the record it points at and the one before; when they contradict it (the tansu test broker answers
offset 0 for every timestamp), the offset is found by a binary search over record timestamps, reading one
record per step (``log2(records)`` reads per partition). Both assume timestamps that do not go backwards
within a partition, which holds for ``LogAppendTime`` and for producers that stamp records as they send
them; a bounded time range additionally leaves out records whose own timestamp lies outside it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError, SourceError
from dagger.kafka_logging import quiet
from dagger.sources.kafka_embedded import READ_FETCH_WAIT_MS

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1


@dataclass
class Position:
    """A start or end position: ``group``, ``earliest``, ``latest``, ``timestamp`` or ``offsets``."""

    kind: str
    timestamp_ms: int | None = None
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)

    def describe(self) -> str:
        if self.kind == "timestamp":
            import datetime as dt

            return dt.datetime.fromtimestamp(self.timestamp_ms / 1000, dt.UTC).isoformat().replace("+00:00", "Z")
        if self.kind == "offsets":
            return json.dumps(self.offsets)
        return self.kind


def parse_offsets(text: str, key: str, allowed: tuple[str, ...]) -> Position:
    """A keyword of ``allowed`` or Spark's JSON form ``{"topic": {"partition": offset}}``."""
    value = text.strip()
    if value in allowed:
        return Position(value)
    try:
        data = json.loads(value)
    except ValueError:
        data = None
    ok = isinstance(data, dict) and all(
        isinstance(parts, dict)
        and all(
            str(p).isdigit() and isinstance(o, int) and not isinstance(o, bool) and o >= -2 for p, o in parts.items()
        )
        for parts in data.values()
    )
    if not ok:
        raise DaggerConfigError(
            f"{key}: {text!r} is not a position; accepted: {', '.join(allowed)}, or JSON offsets per topic and "
            'partition such as {"bookings": {"0": 42, "1": -2}} (-2 earliest, -1 latest)'
        )
    return Position("offsets", offsets={t: {str(p): int(o) for p, o in parts.items()} for t, parts in data.items()})


def start_position(stream: StreamConfig, from_ms: int | None = None) -> Position:
    """The stream's start; ``from_ms`` (``dagger run --from``) overrides its keys."""
    if from_ms is not None:
        return Position("timestamp", timestamp_ms=from_ms)
    if stream.settings.SOURCE_KAFKA_STARTING_TIMESTAMP:
        return Position(
            "timestamp", timestamp_ms=_instant_ms(stream.settings.SOURCE_KAFKA_STARTING_TIMESTAMP, stream, "STARTING")
        )
    return parse_offsets(
        stream.settings.SOURCE_KAFKA_STARTING_OFFSETS,
        f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].SOURCE_KAFKA_STARTING_OFFSETS",
        ("group", "earliest", "latest"),
    )


def end_position(stream: StreamConfig, to_ms: int | None = None) -> Position | None:
    """The stream's end (None: unbounded); ``to_ms`` (``dagger run --to``) overrides its keys."""
    if to_ms is not None:
        return Position("timestamp", timestamp_ms=to_ms)
    if stream.settings.SOURCE_KAFKA_ENDING_TIMESTAMP:
        return Position(
            "timestamp", timestamp_ms=_instant_ms(stream.settings.SOURCE_KAFKA_ENDING_TIMESTAMP, stream, "ENDING")
        )
    if stream.settings.SOURCE_KAFKA_ENDING_OFFSETS:
        return parse_offsets(
            stream.settings.SOURCE_KAFKA_ENDING_OFFSETS,
            f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].SOURCE_KAFKA_ENDING_OFFSETS",
            ("latest",),
        )
    return None


def _instant_ms(text: str, stream: StreamConfig, which: str) -> int:
    from dagger.sources.time_partitions import parse_instant

    key = f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].SOURCE_KAFKA_{which}_TIMESTAMP"
    return int(parse_instant(text, key).timestamp() * 1000)


def _key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def resolve(
    consumer: Any,
    position: Position,
    marks: dict[str, tuple[int, int]],
    table: str,
    reset: str = "latest",
    probe_config: dict[str, str] | None = None,
) -> dict[str, int]:
    """Offsets (``{"topic:partition": offset}``) of ``position`` for every partition in ``marks``."""
    from confluent_kafka import TopicPartition

    if position.kind == "earliest":
        return {k: low for k, (low, _) in marks.items()}
    if position.kind == "latest":
        return {k: high for k, (_, high) in marks.items()}
    if position.kind == "offsets":
        out = {}
        for k, (low, high) in marks.items():
            topic, _, partition = k.rpartition(":")
            wanted = position.offsets.get(topic, {}).get(partition, EARLIEST)
            out[k] = low if wanted == EARLIEST else high if wanted == LATEST else min(max(wanted, low), high)
        return out
    if position.kind == "timestamp":
        return offsets_for_timestamp(consumer, marks, position.timestamp_ms, table, probe_config or {})
    # group: committed offsets, else auto.offset.reset
    tps = [TopicPartition(*_split(k)) for k in marks]
    committed = consumer.committed(tps, timeout=30) if tps else []
    out = {}
    for tp in committed:
        k = _key(tp.topic, tp.partition)
        low, high = marks[k]
        if tp.offset >= 0:
            out[k] = min(max(tp.offset, low), high)
        else:
            out[k] = low if reset == "earliest" else high
    return out


def _split(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def offsets_for_timestamp(
    consumer: Any, marks: dict[str, tuple[int, int]], ts_ms: int, table: str, probe_config: dict[str, str]
) -> dict[str, int]:
    """The first offset whose record timestamp is ``>= ts_ms``, per partition, checked against the records.

    ``consumer`` asks the broker; ``probe_config`` (the stream's client settings) builds the consumer that
    reads single records to check the answer.
    """
    from confluent_kafka import KafkaException, TopicPartition

    if not marks:
        return {}
    query = [TopicPartition(*_split(k), ts_ms) for k in marks]
    try:
        answers = {_key(tp.topic, tp.partition): tp.offset for tp in consumer.offsets_for_times(query, timeout=30)}
    except KafkaException as exc:
        log.warning("stream '%s': offsets_for_times failed (%s); searching record timestamps instead", table, exc)
        answers = {}
    out = {}
    probe = _Probe(probe_config, table)
    try:
        for k, (low, high) in marks.items():
            answer = answers.get(k, -1)
            candidate = high if answer < 0 else min(max(answer, low), high)
            if _consistent(probe, k, candidate, low, high, ts_ms):
                out[k] = candidate
                continue
            found = _search(probe, k, low, high, ts_ms)
            log.warning(
                "stream '%s': the broker placed timestamp %d of %s at offset %d, which its records contradict; "
                "offset %d found by binary search over record timestamps (%d reads)",
                table,
                ts_ms,
                k,
                answer,
                found,
                probe.reads,
            )
            out[k] = found
    finally:
        probe.close()
    return out


def _consistent(probe: _Probe, key: str, offset: int, low: int, high: int, ts_ms: int) -> bool:
    if offset < high:
        at = probe.first_at_or_after(key, offset, high)
        if at is not None and at[1] < ts_ms:
            return False
    if offset > low:
        before = probe.first_at_or_after(key, offset - 1, offset)
        if before is not None and before[1] >= ts_ms:
            return False
    return True


def _search(probe: _Probe, key: str, low: int, high: int, ts_ms: int) -> int:
    lo, hi = low, high
    while lo < hi:
        mid = (lo + hi) // 2
        found = probe.first_at_or_after(key, mid, hi)
        if found is None or found[1] >= ts_ms:
            hi = mid
        else:
            lo = found[0] + 1
    return lo


class _Probe:
    """Reads single records: ``(offset, timestamp_ms)`` of the first record in ``[offset, stop)``."""

    def __init__(self, config: dict[str, str], table: str):
        self.config = config
        self.table = table
        self.reads = 0
        self._consumer = None

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = dict(self.config)
            conf.update(
                {"enable.auto.commit": "false", "enable.partition.eof": "true", "fetch.wait.max.ms": READ_FETCH_WAIT_MS}
            )
            self._consumer = Consumer(quiet(conf))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def first_at_or_after(self, key: str, offset: int, stop: int) -> tuple[int, int] | None:
        from confluent_kafka import KafkaError, TopicPartition

        topic, partition = _split(key)
        self.reads += 1
        self.consumer.assign([TopicPartition(topic, partition, offset)])
        try:
            for _ in range(20):
                for m in self.consumer.consume(1, timeout=1.0):
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            return None
                        raise SourceError(f"stream '{self.table}': reading {key} at offset {offset}: {m.error()}")
                    if m.offset() >= stop:
                        return None
                    return m.offset(), m.timestamp()[1]
            raise SourceError(
                f"stream '{self.table}': no record of {key} at offset {offset} within 20 s while locating a timestamp"
            )
        finally:
            self.consumer.unassign()
