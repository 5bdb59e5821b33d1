"""Dagger's Kafka reader with its records read in the JVM (``dagger/jvm/KafkaRanges*.java``): the planning stays
the Python reader's (:class:`~dagger.kafka.source.reader.KafkaStreamReader`: positions, admission, event-time
alignment, new topics and partitions), run in the driver's process and called by the JVM through py4j's callback server; each
task reads its offset ranges with the Java Kafka client straight into Spark's rows, decoded in the JVM by the
stream's format. No Python worker is on the records' way. Runs on the driver.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from dagger.kafka.source.reader import KafkaStreamReader

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.kafka.source.spec import KafkaSourceSpec

SOURCE_CLASS = "dagger.kafka.KafkaRangesSource"


class JvmPlanner:
    """The Python reader's planning, as the JVM's ``dagger.kafka.RangePlanner`` (offsets as JSON text). Its group
    commits are the runner's, after each finished micro-batch (:meth:`dagger.job.Job.after_batches`): Spark's
    asynchronous progress tracking calls ``commit`` two micro-batches late, and never for the last ones of a
    quiet stream."""

    def __init__(self, reader: KafkaStreamReader):
        self.reader = reader

    def initialOffset(self) -> str:  # noqa: N802 - the JVM interface's names
        return json.dumps(self.reader.initialOffset())

    def defaultMaxRows(self) -> int:  # noqa: N802
        limit = self.reader.getDefaultReadLimit()
        return limit.max_rows if isinstance(limit, ReadMaxRows) else -1

    def latestOffset(self, start: str, max_rows: int) -> str:  # noqa: N802
        limit = ReadMaxRows(max_rows) if max_rows >= 0 else ReadAllAvailable()
        return json.dumps(self.reader.latestOffset(json.loads(start), limit))

    def reportLatestOffset(self) -> str | None:  # noqa: N802
        reported = self.reader.reportLatestOffset()
        return None if reported is None else json.dumps(reported)

    def partitions(self, start: str, end: str) -> str:
        """The planner's ranges in as many tasks as it chose, each partition in the same task from one micro-batch
        to the next while their number holds (by its place among the stream's partitions): a task's consumer,
        kept in the JVM for the set of partitions it read, then finds its positions and what it fetched ahead."""
        tasks = self.reader.partitions(json.loads(start), json.loads(end))
        ranges = sorted((r for task in tasks for r in task.ranges), key=lambda r: (r.topic, r.partition))
        places = {tp: i for i, tp in enumerate(self.reader.listed_partitions())}
        grouped: list[list[list[Any]]] = [[] for _ in tasks]
        for i, r in enumerate(ranges):
            grouped[places.get((r.topic, r.partition), i) % len(grouped)].append([r.topic, r.partition, r.start, r.end])
        return json.dumps([group for group in grouped if group])

    def commit(self, end: str) -> None:
        """Nothing: the runner commits the group's offsets (see the class)."""

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.reader.prepareForTriggerAvailableNow()

    def stop(self) -> None:
        self.reader.stop()

    class Java:
        implements = ["dagger.kafka.RangePlanner"]


def jvm_stream(
    spark: SparkSession, spec: KafkaSourceSpec, java_consumer: dict[str, str], decode: dict[str, str] | None = None
) -> DataFrame:
    """The stream's raw records (``value``, ``topic``, ``partition``, ``offset``, ``timestamp``) read in the JVM,
    planned by the Python reader of ``spec``; ``java_consumer``: the stream's Java client settings."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    planner_id = f"{spec.table}-{uuid.uuid4().hex[:8]}"
    planner = JvmPlanner(KafkaStreamReader(spec))
    spark._jvm.dagger.kafka.KafkaRangesSource.register(planner_id, planner)
    reader = spark.readStream.format(SOURCE_CLASS).option("planner", planner_id).option("table", spec.table)
    for name, value in java_consumer.items():
        reader = reader.option(f"kafka.{name}", value)
    reader = reader.option("unreachableMs", str(spec.unreachable_timeout_ms))
    for name, value in (decode or {}).items():
        reader = reader.option(name, value)
    if spec.time_range is not None:
        low, high = spec.time_range
        if low is not None:
            reader = reader.option("timeFrom", str(low))
        if high is not None:
            reader = reader.option("timeUntil", str(high))
    return reader.load()
