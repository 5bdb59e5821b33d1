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

**Timestamp seeks** ask the broker (``ListOffsets`` by time, ``offsets_for_times``): the earliest offset whose
record timestamp is at or after the instant, the end of the partition when there is none, as Kafka's consumers
and Spark's Kafka source seek. A bounded time range additionally leaves out records whose own timestamp lies
outside it (producers' timestamps can go backwards within a partition).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagger.config.instants import parse_instant
from dagger.errors import DaggerConfigError, SourceError

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
    key = f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].SOURCE_KAFKA_{which}_TIMESTAMP"
    return int(parse_instant(text, key).timestamp() * 1000)


def offset_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def resolve(
    consumer: Any,
    position: Position,
    marks: dict[str, tuple[int, int]],
    table: str,
    reset: str = "latest",
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
        return offsets_for_timestamp(consumer, marks, position.timestamp_ms, table)
    # group: committed offsets, else auto.offset.reset
    tps = [TopicPartition(*split_offset_key(k)) for k in marks]
    committed = _committed(consumer, tps, table) if tps else []
    out = {}
    for tp in committed:
        k = offset_key(tp.topic, tp.partition)
        low, high = marks[k]
        if tp.offset >= 0:
            out[k] = min(max(tp.offset, low), high)
        else:
            out[k] = low if reset == "earliest" else high
    return out


def _committed(consumer: Any, tps: list[Any], table: str, timeout_s: float = 30.0) -> list[Any]:
    """The group's committed offsets of ``tps``; retried while the brokers answer with a retriable error (the
    group's coordinator is moving or still loading: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), as Kafka's
    Java consumer retries them."""

    from confluent_kafka import KafkaError, KafkaException

    moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.committed(tps, timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            retry = error is not None and (error.retriable() or error.code() in moving)
            if not retry or time.monotonic() >= deadline:
                raise SourceError(
                    f"stream '{table}': cannot read the consumer group's committed offsets: "
                    f"{error.str() if error is not None else exc}"
                ) from None
            log.info("stream '%s': committed offsets not available yet (%s); asking again", table, error.str())
            time.sleep(0.2)


def split_offset_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def offsets_for_timestamp(
    consumer: Any, marks: dict[str, tuple[int, int]], ts_ms: int, table: str, timeout_s: float = 30.0
) -> dict[str, int]:
    """The first offset whose record timestamp is ``>= ts_ms``, per partition (the partition's end when no record
    is that late), as the broker's time index answers. A partition whose answer carries an error is asked again
    while the error is retriable and ``timeout_s`` lasts (its -1 offset is no answer, not "no such record": taken
    as the end, a replay's start would skip the whole partition); then the look-up fails naming it."""

    from confluent_kafka import KafkaException, TopicPartition

    if not marks:
        return {}
    deadline = time.monotonic() + timeout_s
    answers: dict[str, int] = {}
    pending = list(marks)
    while pending:
        query = [TopicPartition(*split_offset_key(k), ts_ms) for k in pending]
        try:
            found = consumer.offsets_for_times(query, timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            raise SourceError(
                f"stream '{table}': the brokers could not look up the offsets of timestamp {ts_ms} "
                f"(SOURCE_KAFKA_*_TIMESTAMP, --from, --to): {exc.args[0].str() if exc.args else exc}"
            ) from None
        failed = []
        for tp in found:
            key = offset_key(tp.topic, tp.partition)
            if tp.error is None:
                answers[key] = tp.offset
            elif tp.error.retriable() and time.monotonic() < deadline:
                failed.append(key)
            else:
                raise SourceError(
                    f"stream '{table}': the brokers could not look up the offset of timestamp {ts_ms} in {key} "
                    f"(SOURCE_KAFKA_*_TIMESTAMP, --from, --to): {tp.error.str()}"
                )
        pending = failed
        if pending:
            log.info("stream '%s': timestamp look-up of %s not answered yet; asking again", table, pending)
            time.sleep(0.2)
    out = {}
    for k, (low, high) in marks.items():
        answer = answers.get(k, -1)
        out[k] = high if answer < 0 else min(max(answer, low), high)
    return out
