"""The dead-letter output: where records a stream cannot decode and rows a sink rejects end up.

One destination per job (``DEAD_LETTER_KAFKA_TOPIC`` or ``DEAD_LETTER_PATH``; a stream's own
``SOURCE_KAFKA_DEAD_LETTER_TOPIC`` overrides it for that stream). Every dead letter says *why* (reason,
and for sinks the error type), *who* (the stream or sink) and *where it came from*:

* **Kafka**: the record value is the original bytes (sources) or the rejected row as a JSON object
  (sinks); the key is the original key (sources). Headers: ``dagger.origin`` (``source``/``sink``),
  ``dagger.reason``, ``dagger.error_type``, ``dagger.stream`` or ``dagger.sink``, ``dagger.job`` and the
  coordinates (``dagger.topic``/``dagger.partition``/``dagger.offset`` for sources,
  ``dagger.batch_id``/``dagger.partition`` for sinks).
* **Files** (``DEAD_LETTER_PATH``, for local runs): JSON lines, one object per dead letter with the same
  information (``value_base64``/``key_base64`` for sources, ``row`` for sinks), one file per Spark task
  that had any, named ``<origin>-<name>-<batch>-<partition>-<random>.jsonl``.

Writers run on executors inside the task that found the bad data; the task fails if a dead letter cannot
be written, so nothing is lost silently. Delivery is at-least-once (a retried task writes again).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from dagger.errors import DaggerError
from dagger.librdkafka_logs import quiet


class DeadLetterError(DaggerError):
    """A dead letter could not be written (the task fails rather than lose it)."""


@dataclass
class DeadLetterSpec:
    """Where dead letters go; plain data, shipped to executors inside source and sink specs. A job's and a stream's
    are made from their keys by :mod:`dagger.kafka.dead_letters` (a Kafka topic's producer settings are a Kafka
    client's)."""

    job: str
    kafka_topic: str | None = None
    producer_config: dict[str, str] = field(default_factory=dict)
    path: str | None = None

    def describe(self) -> str:
        if self.kafka_topic:
            return f"kafka topic {self.kafka_topic} on {self.producer_config.get('bootstrap.servers')}"
        return f"JSON files in {self.path}"

    def writer(self, origin: str, name: str, batch_id: int = -1, partition: int = -1) -> DeadLetterWriter:
        """A writer for one task; ``origin`` is ``source`` or ``sink``, ``name`` the stream or sink."""
        if self.kafka_topic:
            return _KafkaDeadLetters(self, origin, name, batch_id, partition)
        return _FileDeadLetters(self, origin, name, batch_id, partition)


class DeadLetterWriter:
    """Collects one task's dead letters; :meth:`flush` makes them durable and returns how many."""

    def __init__(self, spec: DeadLetterSpec, origin: str, name: str, batch_id: int, partition: int):
        self.spec = spec
        self.origin = origin
        self.name = name
        self.batch_id = batch_id
        self.partition = partition
        self.count = 0

    def _base(self, reason: str, error_type: str | None) -> dict[str, Any]:
        record = {"origin": self.origin, self._who: self.name, "job": self.spec.job, "reason": reason}
        if error_type:
            record["error_type"] = error_type
        return record

    @property
    def _who(self) -> str:
        return "stream" if self.origin == "source" else "sink"

    def write_record(self, value: bytes | None, key: bytes | None, reason: str, coordinates: dict[str, Any]) -> None:
        """One undecodable source record, raw bytes as read, with its topic/partition/offset."""
        raise NotImplementedError

    def write_rows(self, rows: list[dict[str, Any]], reasons: list[str], error_types: list[str]) -> None:
        """Rows a sink rejected (as dicts of column → value), each with its reason and error type."""
        raise NotImplementedError

    def flush(self) -> int:
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional hook
        """Drop what is buffered without writing it (the task failed)."""

    def _sink_coordinates(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "partition": self.partition}


def row_json(row: dict[str, Any]) -> str:
    """A rejected row as compact JSON (timestamps ISO-8601 UTC, bytes base64, decimals as strings)."""
    return json.dumps(row, default=_json_default, separators=(",", ":"), ensure_ascii=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


class _FileDeadLetters(DeadLetterWriter):
    def __init__(self, *args: Any):
        super().__init__(*args)
        self.lines: list[str] = []

    def write_record(self, value: bytes | None, key: bytes | None, reason: str, coordinates: dict[str, Any]) -> None:
        record = self._base(reason, "DESERIALIZATION_ERROR")
        record["coordinates"] = coordinates
        record["value_base64"] = base64.b64encode(value).decode() if value is not None else None
        record["key_base64"] = base64.b64encode(key).decode() if key is not None else None
        self._add(record)

    def write_rows(self, rows: list[dict[str, Any]], reasons: list[str], error_types: list[str]) -> None:
        for row, reason, error_type in zip(rows, reasons, error_types, strict=True):
            record = self._base(reason, error_type)
            record["coordinates"] = self._sink_coordinates()
            record["row"] = row
            self._add(record)

    def _add(self, record: dict[str, Any]) -> None:
        record["time"] = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
        self.lines.append(row_json(record))
        self.count += 1

    def flush(self) -> int:
        if not self.lines:
            return 0
        name = f"{self.origin}-{_safe(self.name)}-{self.batch_id}-{self.partition}-{uuid.uuid4().hex[:8]}.jsonl"
        try:
            os.makedirs(self.spec.path, exist_ok=True)
            target = os.path.join(self.spec.path, name)
            with open(target + ".tmp", "w", encoding="utf-8") as out:
                out.write("\n".join(self.lines) + "\n")
            os.replace(target + ".tmp", target)
        except OSError as exc:
            raise DeadLetterError(
                f"{self._who} '{self.name}': cannot write {len(self.lines)} dead letter(s) to DEAD_LETTER_PATH "
                f"{self.spec.path}: {exc.strerror or exc}"
            ) from None
        written, self.lines = len(self.lines), []
        return written


class _KafkaDeadLetters(DeadLetterWriter):
    def __init__(self, *args: Any):
        super().__init__(*args)
        from confluent_kafka import Producer

        self.errors: list[str] = []
        self.producer = Producer(quiet({"linger.ms": "5", **self.spec.producer_config}))

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def _produce(self, value: bytes | None, key: bytes | None, headers: dict[str, Any]) -> None:
        encoded = [(f"dagger.{k}", str(v).encode()) for k, v in headers.items() if v is not None]
        self.producer.produce(self.spec.kafka_topic, value=value, key=key, headers=encoded, on_delivery=self._delivered)
        self.producer.poll(0)
        self.count += 1

    def write_record(self, value: bytes | None, key: bytes | None, reason: str, coordinates: dict[str, Any]) -> None:
        headers = self._base(reason, "DESERIALIZATION_ERROR")
        headers["source"] = coordinates.pop("source", "kafka")
        headers.update(coordinates)
        self._produce(value, key, headers)

    def write_rows(self, rows: list[dict[str, Any]], reasons: list[str], error_types: list[str]) -> None:
        for row, reason, error_type in zip(rows, reasons, error_types, strict=True):
            headers = self._base(reason, error_type)
            headers.update(self._sink_coordinates())
            self._produce(row_json(row).encode(), None, headers)

    def close(self) -> None:
        self.producer.purge()
        self.producer.flush(0)

    def flush(self) -> int:
        remaining = self.producer.flush(60)
        if remaining or self.errors:
            raise DeadLetterError(
                f"{self._who} '{self.name}': writing to dead-letter topic {self.spec.kafka_topic} failed "
                f"({remaining} undelivered): {'; '.join(self.errors[:3]) or 'timeout'}"
            )
        written, self.count = self.count, 0
        return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
