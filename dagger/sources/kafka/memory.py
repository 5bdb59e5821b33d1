"""Kafka records held in memory, read by the Kafka source's own code: ``dagger test`` feeds a case's records
through the same decoding, invalid-record policy and dead letters as records fetched from a broker.

:class:`MemoryFetcher` stands where :func:`dagger.sources.kafka.fetcher.open_fetcher`'s reader stands in
:func:`dagger.sources.kafka.partitions.read_partition` (runs on the executors): it hands out a partition's records
as the :class:`~dagger.sources.kafka.fetcher.Chunk` objects the broker's reader makes, with their offsets, keys
and timestamps. Nothing else of the read changes. :class:`MemoryDataSource` is the Spark data source around it,
for a bounded input: one task per topic-partition.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from dagger.sources.kafka.fetcher import Chunk
from dagger.sources.kafka.partitions import KafkaPartition, read_partition
from dagger.sources.kafka.spec import KafkaSourceSpec, decoder_for


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


#: the Spark data source of records held in memory (registered beside ``dagger-kafka``)
MEMORY_FORMAT = "dagger-kafka-memory"


def records_option(records: dict[tuple[str, int], list[MemoryRecord]]) -> str:
    """The ``records`` option: each topic-partition's records (runs on the driver)."""
    return json.dumps(
        [
            {
                "topic": topic,
                "partition": partition,
                "offset": r.offset,
                "timestamp_ms": r.timestamp_ms,
                "value": None if r.value is None else base64.b64encode(r.value).decode(),
                "key": None if r.key is None else base64.b64encode(r.key).decode(),
            }
            for (topic, partition), held in records.items()
            for r in held
        ]
    )


def _records(option: str) -> dict[tuple[str, int], list[MemoryRecord]]:
    out: dict[tuple[str, int], list[MemoryRecord]] = {}
    for r in json.loads(option):
        value = None if r["value"] is None else base64.b64decode(r["value"])
        key = None if r["key"] is None else base64.b64decode(r["key"])
        out.setdefault((r["topic"], r["partition"]), []).append(
            MemoryRecord(value, key, r["offset"], r["timestamp_ms"])
        )
    return out


class MemoryDataSource(DataSource):
    """The ``dagger-kafka-memory`` Spark data source: options ``spec`` (a :class:`KafkaSourceSpec`, as the Kafka
    source's) and ``records`` (:func:`records_option`). Batch reads only: a bounded input."""

    @classmethod
    def name(cls) -> str:
        return MEMORY_FORMAT

    def schema(self) -> StructType:
        return decoder_for(KafkaSourceSpec.from_option(self.options["spec"])).spark_schema

    def reader(self, schema: StructType) -> MemoryBatchReader:
        return MemoryBatchReader(KafkaSourceSpec.from_option(self.options["spec"]), _records(self.options["records"]))


class MemoryBatchReader(DataSourceReader):
    """One task per topic-partition; each reads its records as the Kafka source reads a fetched range."""

    def __init__(self, spec: KafkaSourceSpec, records: dict[tuple[str, int], list[MemoryRecord]]):
        self.spec = spec
        self.records = records

    def partitions(self) -> list[KafkaPartition]:
        """Runs on the driver: a range from each partition's first offset to past its last."""
        return [
            KafkaPartition(topic, partition, held[0].offset, held[-1].offset + 1)
            for (topic, partition), held in sorted(self.records.items())
            if held
        ]

    def read(self, partition: KafkaPartition) -> Iterator[Any]:
        """Runs on the executors: the Kafka source's own read of a range, from memory."""
        if not isinstance(partition, KafkaPartition):
            return  # no records at all: PySpark plans one placeholder partition for an empty read
        held = self.records[(partition.topic, partition.partition)]
        yield from read_partition(self.spec, partition, MemoryFetcher(held, partition.start))
