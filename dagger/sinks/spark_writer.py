"""The one Spark streaming writer behind every job: Arrow batches in, fanned out to each sink.

Registered as the Python data source ``dagger-sink``. Its ``sinks`` option holds the pickled
:class:`~dagger.plugins.sink.Sink` list; each Spark task opens one writer per sink, hands every Arrow batch
to all of them and flushes them when its data is done, and the driver commits each sink once per
micro-batch with the batch id.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from dagger.plugins.sink import JVM_COLUMN_PREFIX, Sink
from dagger.serde.variant import typed_variants

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

    def write(self, iterator: Iterator[Any], batch_id: int | None = None) -> SinkCommit:
        """Write one task's rows to every sink; ``batch_id`` None: the micro-batch's, from the task."""
        from pyspark import TaskContext

        context = TaskContext.get()
        partition_id = context.partitionId() if context else 0
        if batch_id is None:
            batch_id = int(context.getLocalProperty("streaming.sql.batchId") or -1) if context else -1
        writers = []
        picks: list[list[int]] | None = None
        try:
            for sink in self.sinks:
                writers.append(sink.writer(partition_id, batch_id))
            for batch in iterator:
                batch = typed_variants(batch)  # untyped lookup outputs: their values' own type, once for all
                if picks is None:
                    picks = [_own_columns(batch.schema.names, sink) for sink in self.sinks]
                for writer, pick in zip(writers, picks, strict=True):
                    writer.write(batch if pick is None else batch.select(pick))
        except BaseException:
            _abort_all(writers)  # one sink failed: the others deliver nothing either (the batch is retried)
            raise
        results = []
        for index, writer in enumerate(writers):
            try:
                results.append(writer.flush())
            except BaseException:
                _abort_all(writers[index:])  # the failed one releases its clients too
                raise
        return SinkCommit(results)

    def commit(self, messages: list[SinkCommit | None], batchId: int) -> None:
        for index, sink in enumerate(self.sinks):
            sink.commit([m.results[index] for m in messages if m is not None], batchId)

    def abort(self, messages: list[SinkCommit | None], batchId: int) -> None:
        """Spark gave up on the micro-batch: every sink hears of it (each must not raise)."""
        for sink in self.sinks:
            _quietly(sink.abort, batchId)


def _own_columns(names: list[str], sink: Sink) -> list[int] | None:
    """The columns ``sink`` is handed: the output's and its own JVM columns (None: all of them)."""
    own = sink.jvm_column("")
    pick = [i for i, n in enumerate(names) if not n.startswith(JVM_COLUMN_PREFIX) or n.startswith(own)]
    return None if len(pick) == len(names) else pick


def _quietly(call: Any, *args: Any) -> None:
    """Run a clean-up hook; a failing one is logged, never hiding the failure that caused the clean-up."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001
        logging.getLogger(__name__).warning("a sink's clean-up failed", exc_info=True)


def _abort_all(writers: list[Any]) -> None:
    for writer in writers:
        _quietly(writer.abort)


class FanOutBatchWriter(DataSourceArrowWriter):
    """The same fan-out for one micro-batch written from ``foreachBatch`` (update/complete modes, which
    Python streaming writers do not support); the batch id comes in the ``batch_id`` option."""

    def __init__(self, sinks: list[Sink], batch_id: int):
        self.stream_writer = FanOutWriter(sinks)
        self.batch_id = batch_id

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        return self.stream_writer.write(iterator, self.batch_id)

    def commit(self, messages: list[SinkCommit | None]) -> None:
        self.stream_writer.commit(messages, self.batch_id)

    def abort(self, messages: list[SinkCommit | None]) -> None:
        self.stream_writer.abort(messages, self.batch_id)


class SinkDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SINK_FORMAT

    def streamWriter(self, schema: StructType, overwrite: bool) -> FanOutWriter:
        return FanOutWriter(decode_sinks(self.options["sinks"]))

    def writer(self, schema: StructType, overwrite: bool) -> FanOutBatchWriter:
        return FanOutBatchWriter(decode_sinks(self.options["sinks"]), int(self.options.get("batch_id", "-1")))


def write_micro_batch(sinks_option: str):  # noqa: ANN201
    """A ``foreachBatch`` function writing each micro-batch to the sinks through the batch writer."""

    def write(df: Any, batch_id: int) -> None:
        df.write.format(SINK_FORMAT).option("sinks", sinks_option).option("batch_id", str(batch_id)).mode(
            "append"
        ).save()

    return write
