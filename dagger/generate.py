"""Synthetic protobuf records of any message type, for load tests, benchmarks and the quickstart
(``dagger generate``).

Every field is filled according to its type, column by column with Arrow and encoded by ptars (no Python object
per field): strings from a small vocabulary per field (``<field>-<k>``) so that GROUP BY keys repeat, numbers
small and random, enums from their values, nested messages, repeated fields (1 to 3 elements) and maps (1 to 3
entries) populated, one member of each ``oneof`` set, and the event Timestamp advancing at
``events_per_second`` of event time from ``start``. Other Timestamps fall within the day after ``start``. A
``malformed_ratio`` of the records are replaced by bytes that are not a valid message, for bad-input tests.

Records go round-robin over the topic's partitions with librdkafka's batch produce, optionally throttled to a
rate; each partition ends with a single-record batch, which keeps end-offset queries exact on every broker.

One module (~350 lines) because ``dagger generate`` is one command: records from a message's fields, then
produced at a rate.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from dagger.errors import DaggerConfigError
from dagger.kafka.client import SECURITY
from dagger.kafka.producer import ProduceError, open_producer

log = logging.getLogger(__name__)

#: what replaces a malformed record: a field tag whose length prefix runs past the end (never decodes)
MALFORMED = b"\x0a\xff\xff\xff\xff\x0f"
_TIMESTAMP = "google.protobuf.Timestamp"


def event_timestamp_field(descriptor: Descriptor, name_or_number: str | int | None = None) -> str | None:
    """The top-level Timestamp field that carries event time: the one named or numbered, else
    ``event_timestamp``, else the first Timestamp field; None when the message has none."""
    stamps = [
        f
        for f in descriptor.fields
        if f.message_type is not None and f.message_type.full_name == _TIMESTAMP and not f.is_repeated
    ]
    if name_or_number not in (None, ""):
        wanted = str(name_or_number)
        for f in stamps:
            if wanted in (f.name, str(f.number)):
                return f.name
        raise DaggerConfigError(
            f"event timestamp field {wanted!r} is not a Timestamp field of {descriptor.full_name}; "
            f"its Timestamp fields: {', '.join(f'{f.name} ({f.number})' for f in stamps) or 'none'}"
        )
    for f in stamps:
        if f.name == "event_timestamp":
            return f.name
    return stamps[0].name if stamps else None


@dataclass
class RecordGenerator:
    """Builds batches of synthetic records of ``descriptor``; successive batches continue the event time.

    Parameters
    ----------
    descriptor:
        The message type.
    seed:
        Seed of the random values; the same seed gives the same records.
    vocabulary:
        Distinct values per string field.
    events_per_second:
        How fast the event Timestamp advances: record ``i`` is at ``start + i / events_per_second``.
    start:
        Event time of the first record (UTC).
    timestamp_field:
        The event Timestamp field (see :func:`event_timestamp_field`); None picks one.
    malformed_ratio:
        Fraction of records replaced by bytes that do not decode.
    data_type:
        ``PROTO`` (serialized messages) or ``JSON`` (one JSON object per record, as the JSON Kafka sink writes rows;
        :meth:`json_schema` describes them for ``INPUT_SCHEMA_JSON_SCHEMA``).
    """

    descriptor: Descriptor
    seed: int = 0
    vocabulary: int = 20
    events_per_second: float = 1000.0
    start: dt.datetime | None = None
    timestamp_field: str | None = None
    malformed_ratio: float = 0.0
    data_type: str = "PROTO"

    def __post_init__(self) -> None:
        from dagger.serde.decode import ptars_handler  # start-up: loads pyspark

        if self.events_per_second <= 0:
            raise DaggerConfigError(f"events per second must be > 0, got {self.events_per_second}")
        if not 0 <= self.malformed_ratio <= 1:
            raise DaggerConfigError(f"malformed ratio must be between 0 and 1, got {self.malformed_ratio}")
        if self.vocabulary < 1:
            raise DaggerConfigError(f"vocabulary must be at least 1, got {self.vocabulary}")
        self.timestamp_field = event_timestamp_field(self.descriptor, self.timestamp_field)
        start = self.start or dt.datetime.now(dt.UTC).replace(microsecond=0)
        self._start_us = int(start.timestamp() * 1_000_000)
        self._handler = ptars_handler(self.descriptor)
        self.schema: pa.Schema = self._handler.schema()
        self._rng = np.random.default_rng(self.seed)
        self._vocabularies: dict[str, pa.Array] = {}
        self.produced = 0  # records built so far (the next record's index)

    def arrow(self, n: int) -> pa.RecordBatch:
        """The next ``n`` records as an Arrow batch of ptars's schema for the message."""
        first = self.produced
        self.produced += n
        columns = []
        for arrow_field in self.schema:
            field = self.descriptor.fields_by_name[arrow_field.name]
            if arrow_field.name == self.timestamp_field:
                step = 1_000_000 / self.events_per_second
                micros = self._start_us + (np.arange(first, first + n, dtype=np.float64) * step).astype(np.int64)
                columns.append(pa.array(micros, pa.int64()).cast(arrow_field.type))
            else:
                columns.append(self._values(arrow_field.type, field, n, arrow_field.name))
        columns = self._one_of_each_oneof(self.descriptor, columns, [f.name for f in self.schema], n)
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def batch(self, n: int) -> pa.BinaryArray:
        """The next ``n`` serialized records (some replaced by :data:`MALFORMED` per ``malformed_ratio``)."""
        if self.data_type == "JSON":
            from dagger.formats.json.writing import json_lines  # start-up: loads orjson, pydantic, pyspark

            encoded = pa.array(json_lines(self.arrow(n)), pa.binary())
        else:
            encoded = self._handler.record_batch_to_array(self.arrow(n))
        if self.malformed_ratio:
            bad = self._rng.random(n) < self.malformed_ratio
            if bad.any():
                encoded = pc.if_else(pa.array(bad), pa.scalar(MALFORMED, pa.binary()), encoded)
        return encoded

    def json_schema(self) -> dict:
        """The JSON Schema of the records in JSON (``INPUT_SCHEMA_JSON_SCHEMA``): every field with a JSON type."""
        from dagger.formats.json.schema import json_schema_of  # start-up: loads orjson, pyspark
        from dagger.serde.types import message_struct  # start-up: loads pyspark

        return json_schema_of(message_struct(self.descriptor))

    # -- values per Arrow type ---------------------------------------------------------------------------

    def _values(self, arrow_type: pa.DataType, field: FieldDescriptor | None, n: int, path: str) -> pa.Array:
        rng = self._rng
        if pa.types.is_struct(arrow_type):
            message = field.message_type if field is not None else None
            names = [f.name for f in arrow_type]
            children = [
                self._values(
                    f.type, message.fields_by_name.get(f.name) if message is not None else None, n, f"{path}.{f.name}"
                )
                for f in arrow_type
            ]
            if message is not None:
                children = self._one_of_each_oneof(message, children, names, n)
            return pa.StructArray.from_arrays(children, fields=list(arrow_type))
        if pa.types.is_map(arrow_type):
            lengths = rng.integers(1, 4, n)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            entry = field.message_type if field is not None else None
            position = np.arange(int(lengths.sum())) - np.repeat(offsets.to_numpy()[:-1], lengths)
            keys = self._keys(arrow_type.key_type, position, path)
            items = self._values(
                arrow_type.item_type,
                entry.fields_by_name["value"] if entry is not None else None,
                len(position),
                f"{path}.value",
            )
            return pa.MapArray.from_arrays(offsets, keys, items, type=arrow_type)
        if pa.types.is_list(arrow_type):
            lengths = rng.integers(1, 4, n)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            values = self._values(arrow_type.value_type, field, int(lengths.sum()), path)
            return pa.ListArray.from_arrays(offsets, values, type=arrow_type)
        if pa.types.is_timestamp(arrow_type):
            micros = self._start_us + rng.integers(0, 86_400_000_000, n)
            return pa.array(micros, pa.int64()).cast(arrow_type)
        if pa.types.is_duration(arrow_type):
            return pa.array(rng.integers(0, 3_600_000_000, n), pa.int64()).cast(arrow_type)
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            if field is not None and field.enum_type is not None:
                names = [v.name for v in field.enum_type.values if v.number != 0] or [field.enum_type.values[0].name]
                return pc.take(pa.array(names, arrow_type), pa.array(rng.integers(0, len(names), n)))
            return pc.take(self._vocabulary(path, arrow_type), pa.array(rng.integers(0, self.vocabulary, n)))
        if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
            if field is not None and field.message_type is not None:  # a recursive message: present and empty
                return pa.array([b""] * n, arrow_type)
            return pc.take(self._vocabulary(path, pa.binary()), pa.array(rng.integers(0, self.vocabulary, n)))
        if pa.types.is_boolean(arrow_type):
            return pa.array(rng.random(n) < 0.5)
        if pa.types.is_integer(arrow_type):
            return pa.array(rng.integers(0, 1000, n), pa.int64()).cast(arrow_type)
        if pa.types.is_floating(arrow_type):
            return pa.array(np.round(rng.random(n) * 100, 3)).cast(arrow_type)
        raise DaggerConfigError(
            f"{self.descriptor.full_name}.{path}: cannot generate values of Arrow type {arrow_type}"
        )

    def _keys(self, arrow_type: pa.DataType, position: np.ndarray, path: str) -> pa.Array:
        """Map keys, distinct within each map: the entry's position (``<field>-key-<j>`` for strings)."""
        if pa.types.is_string(arrow_type):
            return pc.take(pa.array([f"{path.rsplit('.', 1)[-1]}-key-{j}" for j in range(3)]), pa.array(position))
        if pa.types.is_boolean(arrow_type):
            return pa.array(position % 2 == 1)
        return pa.array(position, pa.int64()).cast(arrow_type)

    def _vocabulary(self, path: str, arrow_type: pa.DataType) -> pa.Array:
        key = f"{path}|{arrow_type}"
        if key not in self._vocabularies:
            name = path.rsplit(".", 1)[-1]
            words = [f"{name}-{k}" for k in range(self.vocabulary)]
            if pa.types.is_binary(arrow_type):
                self._vocabularies[key] = pa.array([w.encode() for w in words], pa.binary())
            else:
                self._vocabularies[key] = pa.array(words, arrow_type)
        return self._vocabularies[key]

    def _one_of_each_oneof(self, message: Descriptor, columns: list, names: list[str], n: int) -> list:
        """Keep one member of each real ``oneof`` per record (the others null)."""
        for oneof in message.oneofs:
            members = [f.name for f in oneof.fields if f.name in names]
            if len(members) < 2:  # proto3 `optional` is a synthetic one-member oneof
                continue
            chosen = self._rng.integers(0, len(members), n)
            for k, name in enumerate(members):
                i = names.index(name)
                columns[i] = pc.if_else(pa.array(chosen == k), columns[i], pa.nulls(n, columns[i].type))
        return columns


def produce_generated(
    generator: RecordGenerator,
    bootstrap: str,
    topic: str,
    count: int,
    rate: float = 0.0,
    partitions: int | None = None,
    batch_size: int = 10_000,
    producer_config: dict[str, str] | None = None,
    progress: Callable[[int, float], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Produce ``count`` generated records (``count`` 0: until interrupted or ``stop()`` is true) to ``topic``;
    returns the count.

    ``rate`` caps records/s (0: as fast as the broker takes them). ``partitions`` creates a missing topic with
    that many partitions (an existing topic keeps its own). ``progress(produced, seconds)`` is called about once
    a second.
    """

    spread = ensure_topic(bootstrap, topic, partitions, producer_config)
    config = {
        "bootstrap.servers": bootstrap,
        "linger.ms": "20",
        "batch.num.messages": "10000",
        "queue.buffering.max.messages": "1000000",
        "queue.buffering.max.kbytes": "1048576",
    }
    config.update(producer_config or {})

    def failed(reason: object) -> RuntimeError:
        return RuntimeError(f"producing to {topic} on {bootstrap} failed: {reason}")

    try:
        producer = open_producer(config, topic)
    except ProduceError as exc:
        raise failed(exc) from None
    chunk = max(1, min(batch_size, int(rate / 20) if rate else batch_size))
    began = last_report = time.monotonic()
    produced = 0
    held: dict[int, pa.BinaryArray] = {}  # the last record of each partition, sent alone at the end
    try:
        while (count == 0 or produced < count) and not (stop is not None and stop()):
            n = chunk if count == 0 else min(chunk, count - produced)
            values = generator.batch(n)
            for p in range(spread):
                mine = values[(p - produced) % spread :: spread]
                if not len(mine):
                    continue
                if count and produced + n >= count:  # the last chunk: hold back each partition's last record
                    held[p] = mine[-1:]
                    mine = mine[:-1]
                producer.produce(mine, partition=p)
            produced += n
            errors, reason = producer.take_failed()
            if errors:
                raise failed(reason)
            now = time.monotonic()
            if rate:
                producer.flush(0)
                ahead = began + produced / rate - now
                if ahead > 0:
                    time.sleep(ahead)
            if progress is not None and now - last_report >= 1:
                progress(produced, now - began)
                last_report = now
        if not held and produced:  # stopped before a count: end each partition with a single record too
            last = generator.batch(spread)
            for j in range(spread):
                held[(produced + j) % spread] = last[j : j + 1]
            produced += spread
    except ProduceError as exc:
        raise failed(exc) from None
    finally:
        remaining = producer.flush(120)
        errors, reason = producer.take_failed()
        producer.close()
        if held:
            single = open_producer({**config, "linger.ms": "0", "batch.num.messages": "1"}, topic)
            for p, value in held.items():
                single.produce(value, partition=p)
                single.flush(30)
            more, why = single.take_failed()
            single.close()
            errors, reason = errors + more, reason or why
        if errors or remaining:
            raise failed(reason or "flush timed out")
    if progress is not None:
        progress(produced, time.monotonic() - began)
    return produced


def ensure_topic(bootstrap: str, topic: str, partitions: int | None, client: dict[str, Any] | None = None) -> int:
    """The topic's partition count, creating the topic with ``partitions`` (default 1) when it is missing;
    ``client``: the connection's security settings (``security.*``, ``sasl.*``, ``ssl.*``), if any."""
    from confluent_kafka.admin import AdminClient, NewTopic

    security = {k: v for k, v in (client or {}).items() if k.startswith(SECURITY)}
    admin = AdminClient({**security, "bootstrap.servers": bootstrap})
    try:
        metadata = admin.list_topics(timeout=10)  # all topics: asking for one would auto-create it
    except Exception as exc:  # noqa: BLE001 - librdkafka reports an unreachable broker as a KafkaException
        raise DaggerConfigError(f"cannot reach the Kafka brokers at {bootstrap}: {exc}") from None
    found = metadata.topics.get(topic)
    if found is not None and found.error is None and found.partitions:
        if partitions and len(found.partitions) != partitions:
            log.warning(
                "topic %s has %d partitions, not %d; producing to all of them", topic, len(found.partitions), partitions
            )
        return len(found.partitions)
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions or 1, replication_factor=1)])
    try:
        futures[topic].result(30)
    except Exception as exc:  # noqa: BLE001
        if "already exists" not in str(exc).lower():
            raise DaggerConfigError(f"cannot create topic {topic} on {bootstrap}: {exc}") from None
    return partitions or 1
