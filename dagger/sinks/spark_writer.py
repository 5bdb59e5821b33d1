"""The one Spark streaming writer behind every job: Arrow batches in, fanned out to each sink.

Registered as the Python data source ``dagger-sink``. Its ``sinks`` option holds the pickled
:class:`~dagger.sinks.base.Sink` list; each Spark task opens one writer per sink, hands every Arrow batch
to all of them and flushes them when its data is done, and the driver commits each sink once per
micro-batch with the batch id.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from dagger.sinks.base import Sink

SINK_FORMAT = "dagger-sink"


def encode_sinks(sinks: list[Sink]) -> str:
    return base64.b64encode(cloudpickle.dumps(sinks)).decode()


def decode_sinks(text: str) -> list[Sink]:
    return cloudpickle.loads(base64.b64decode(text))


class SinkCommit(WriterCommitMessage):
    """Per-task results, one per sink, in sink order."""

    def __init__(self, results: list[Any]):
        self.results = results


class FanOutWriter(DataSourceStreamArrowWriter):
    def __init__(self, sinks: list[Sink]):
        self.sinks = sinks

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition_id = context.partitionId() if context else 0
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or -1) if context else -1
        writers = [sink.writer(partition_id, batch_id) for sink in self.sinks]
        for batch in iterator:
            for writer in writers:
                writer.write(batch)
        return SinkCommit([writer.flush() for writer in writers])

    def commit(self, messages: list[SinkCommit | None], batchId: int) -> None:
        for index, sink in enumerate(self.sinks):
            sink.commit([m.results[index] for m in messages if m is not None], batchId)

    def abort(self, messages: list[SinkCommit | None], batchId: int) -> None:
        return None


class SinkDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SINK_FORMAT

    def streamWriter(self, schema: StructType, overwrite: bool) -> FanOutWriter:
        return FanOutWriter(decode_sinks(self.options["sinks"]))
