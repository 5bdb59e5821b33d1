"""Kafka records held in memory, read by the Kafka source's own code: ``dagger test`` feeds a case's records
through the same decoding, invalid-record policy and dead letters as records fetched from a broker.

:class:`MemoryFetcher` stands where :func:`dagger.kafka.source.fetcher.open_fetcher`'s reader stands in
:func:`dagger.kafka.source.partitions.read_partition` (runs on the executors): it hands out a partition's records
as the :class:`~dagger.kafka.source.fetcher.Chunk` objects the broker's reader makes, with their offsets, keys
and timestamps. Nothing else of the read changes. :class:`MemoryDataSource` is the Spark data source around it:
a bounded input (one task per topic-partition), or a stream whose micro-batches are the records' ``batch``
numbers, one at a time (:class:`MemoryStreamReader`). :class:`MemorySource` is the job's source of a stream whose
records are held here, in place of the stream's :class:`~dagger.kafka.source.KafkaSource`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from dagger.dead_letter import DeadLetterSpec
from dagger.kafka.source import KafkaSource
from dagger.kafka.source.decoded import decoded_table
from dagger.kafka.source.fetcher import Chunk
from dagger.kafka.source.partitions import KafkaPartition, read_partition
from dagger.kafka.source.spec import STREAM_KEY, KafkaSourceSpec, decoder_for
from dagger.session.spark import use_data_source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig
    from dagger.plugins.source import SourceEnv


@dataclass(frozen=True)
class MemoryRecord:
    """One record as a broker would hold it: its bytes, where it sits and when it was written."""

    value: bytes | None
    key: bytes | None = None
    offset: int = 0
    timestamp_ms: int = -1  # -1: none, as librdkafka says
    batch: int = 0  # the micro-batch it arrives in (a stream read from memory)


class MemoryFetcher:
    """A partition's records from memory, a fetch at a time (the :class:`~dagger.kafka.source.fetcher.Fetcher`
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
                "batch": r.batch,
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
            MemoryRecord(value, key, r["offset"], r["timestamp_ms"], r.get("batch", 0))
        )
    return out


def _read(spec: KafkaSourceSpec, records: dict, partition: KafkaPartition) -> Iterator[Any]:
    """The Kafka source's own read of a range (runs on the executors), its records from memory."""
    held = records[(partition.topic, partition.partition)]
    yield from read_partition(spec, partition, MemoryFetcher(held, partition.start))


class MemoryDataSource(DataSource):
    """The ``dagger-kafka-memory`` Spark data source: options ``spec`` (a :class:`KafkaSourceSpec`, as the Kafka
    source's), ``records`` (:func:`records_option`) and, for a stream, ``batches`` (how many micro-batches)."""

    @classmethod
    def name(cls) -> str:
        return MEMORY_FORMAT

    def schema(self) -> StructType:
        return decoder_for(KafkaSourceSpec.from_option(self.options["spec"])).spark_schema

    def reader(self, schema: StructType) -> MemoryBatchReader:
        return MemoryBatchReader(KafkaSourceSpec.from_option(self.options["spec"]), _records(self.options["records"]))

    def streamReader(self, schema: StructType) -> MemoryStreamReader:
        batches = int(self.options.get("batches", "1"))
        return MemoryStreamReader(
            KafkaSourceSpec.from_option(self.options["spec"]),
            _records(self.options["records"]),
            int(self.options.get("until") or batches),
        )


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
        yield from _read(self.spec, self.records, partition)


class MemoryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of ``batches`` micro-batches: micro-batch ``k`` reads the records of batch ``k``, so the watermark
    moves between them as between two fetches from a broker. Offsets are ``{"@table": table, "batch": k}``; every
    stream of a job moves one batch per micro-batch, in lockstep. A query given fewer ``batches`` than the
    records have stops early; the next one, started from its checkpoint, goes on (``dagger test
    --restore-check``)."""

    def __init__(self, spec: KafkaSourceSpec, records: dict[tuple[str, int], list[MemoryRecord]], batches: int):
        self.spec = spec
        self.records = records
        self.batches = batches

    def _offset(self, batch: int) -> dict:
        return {STREAM_KEY: self.spec.table, "batch": batch}

    def initialOffset(self) -> dict:
        """Runs on the driver: before the first batch."""
        return self._offset(0)

    def prepareForTriggerAvailableNow(self) -> None:
        """Runs on the driver: the batches are known from the start."""

    def latestOffset(self, start: dict, limit: Any) -> dict:  # noqa: ARG002 - one batch per micro-batch
        """Runs on the driver: one batch more than ``start`` (the same answer however often it is asked)."""
        return self._offset(min(int(start["batch"]) + 1, self.batches))

    def partitions(self, start: dict, end: dict) -> list[KafkaPartition]:
        """Runs on the driver: the records of batches ``start`` to ``end``, a range per topic-partition."""
        wanted = range(int(start["batch"]), int(end["batch"]))
        parts = []
        for (topic, partition), held in sorted(self.records.items()):
            offsets = [r.offset for r in held if r.batch in wanted]
            if offsets:
                parts.append(KafkaPartition(topic, partition, offsets[0], offsets[-1] + 1))
        return parts

    def read(self, partition: KafkaPartition) -> Iterator[Any]:
        """Runs on the executors: the Kafka source's own read of a range, from memory."""
        yield from _read(self.spec, self.records, partition)

    def commit(self, end: dict) -> None:
        """Runs on the driver: nothing to tell anyone."""


class MemorySource(KafkaSource):
    """A Kafka stream's source whose records are held in memory (``dagger test``): the stream's own decoding,
    policy and pruning, with its dead letters written to ``dead_letter_path`` (JSON lines); nothing is asked of
    a broker. Runs on the driver."""

    def __init__(
        self,
        records: list[MemoryRecord],
        batches: int,
        bounded: bool,
        dead_letter_path: str,
        until: int | None = None,
    ):
        self.records = records
        self.batches = batches
        self.bounded = bounded
        self.dead_letter_path = dead_letter_path
        #: a streaming query reads the first ``until`` batches only (None: all of them)
        self.until = until

    def reach(self, stream: StreamConfig, config: JobConfig) -> None:
        """Nothing to reach."""

    def is_bounded(self, stream: StreamConfig, to_ms: int | None = None) -> bool:
        return self.bounded

    def input_description(
        self, spark: SparkSession, stream: StreamConfig, from_ms: int | None, to_ms: int | None
    ) -> dict[str, Any]:
        return {"table": stream.INPUT_SCHEMA_TABLE, "records": len(self.records)}

    def build(self, stream: StreamConfig, env: SourceEnv) -> DataFrame:
        # the stream's positions and group are the broker's business: read from memory, from the first record
        options = env.options
        spec = self.spec(stream, replace(env, options=replace(options, bounded=False, commit_offsets=False)))
        config, spark = env.config, env.spark
        spec.start, spec.end, spec.time_range, spec.hold_file = None, None, None, None
        if spec.invalid_policy == "dead-letter":
            spec.dead_letter = dataclasses.asdict(DeadLetterSpec(config.job_slug, path=self.dead_letter_path))
        topic = stream.settings.SOURCE_KAFKA_TOPIC_NAMES.split(",")[0].strip()  # one partition of the first
        reader = spark.read if options.bounded else spark.readStream
        df = (
            reader.format(use_data_source(spark, MemoryDataSource))
            .option("spec", spec.to_option())
            .option("records", records_option({(topic, 0): self.records}))
            .option("batches", str(self.batches))
            .option("until", str(self.until or ""))
            .load()
        )
        return decoded_table(df, spec)

    def finish(self, progress: dict[str, Any], streams: list[StreamConfig], config: JobConfig) -> None:
        """No consumer group to commit to."""
