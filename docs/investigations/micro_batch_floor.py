"""The shortest micro-batch Spark runs here, with nothing of dagger's in the path: how long a batch of one row
takes when the source, the sink or both are Python data sources (PySpark's own API), against Spark's JVM
``rate`` source and ``noop`` sink.

Each setting runs its query as fast as Spark triggers it (``processingTime=0``) on ``local[2]``, one row per
micro-batch, drops the first ``--warmup`` seconds (JIT, first Python workers) and prints the median and p90 of
``batchDuration`` and of each phase of Spark's ``durationMs`` over the next ``--seconds``. A record waits on
average half a micro-batch for the next one to start and then a whole one, so the end-to-end p50 of a job cannot
go below about 1.5 times the floor of the kind of batch it runs. Also printed: how long after launch the session
was ready and the first micro-batch finished, and the memory of the process tree (JVM, Python daemons and
workers) at the end of each setting.

``latency`` measures that end-to-end latency itself: a Python source whose offsets are the wall clock in
milliseconds (one row per millisecond, each holding the millisecond it became readable) into a Python sink that
writes down, for every row, the time from that millisecond to its write (p50/p99/max of the rows after the
warm-up). It is the floor of a record's latency through a job that reads and writes Python data sources.

    .venv/bin/python docs/investigations/micro_batch_floor.py               # every setting, 10 s warm-up, 20 s each
    .venv/bin/python docs/investigations/micro_batch_floor.py --only latency --seconds 60   # the end-to-end floor
    .venv/bin/python docs/investigations/micro_batch_floor.py --only python-both --seconds 60  # its start-up and memory
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LAUNCHED = time.monotonic()  # before pyspark is imported: start-up is counted from here

from pyspark.sql import SparkSession  # noqa: E402 - after LAUNCHED
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)


class OneRow(DataSource):
    """A streaming source with one new row per micro-batch (its offset moves by one on every call)."""

    @classmethod
    def name(cls) -> str:
        return "one_row"

    def schema(self) -> str:
        return "n long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: ARG002, N802 - PySpark's API
        return OneRowReader()

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: ARG002, N802
        return Discard()


class OneRowReader(DataSourceStreamReader):
    def __init__(self) -> None:
        self.next = 0

    def initialOffset(self) -> dict:  # noqa: N802 - PySpark's API
        return {"n": 0}

    def latestOffset(self) -> dict:  # noqa: N802 - PySpark's API
        self.next += 1
        return {"n": self.next}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition: InputPartition):  # noqa: ANN201 - an iterator of tuples
        start, end = partition.value
        for n in range(start, end):
            yield (n,)


class Discard(DataSourceStreamWriter):
    """A streaming sink that counts its rows and keeps nothing."""

    def write(self, iterator) -> WriterCommitMessage:  # noqa: ANN001 - rows
        return WriterCommitMessage() if sum(1 for _ in iterator) >= 0 else None

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - PySpark's API
        pass


class Clock(DataSource):
    """A streaming source of one row per millisecond: its offset is the wall clock in milliseconds, and each row
    holds the millisecond it became readable. With :class:`Latencies` as the sink, a row's latency is the time
    from that millisecond to its write: a record's end-to-end latency through a micro-batch, nothing else."""

    @classmethod
    def name(cls) -> str:
        return "clock"

    def schema(self) -> str:
        return "ms long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: ARG002, N802 - PySpark's API
        return ClockReader()

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: ARG002, N802
        return Latencies(self.options["path"])


class ClockReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:  # noqa: N802 - PySpark's API
        return {"ms": int(time.time() * 1000)}

    def latestOffset(self) -> dict:  # noqa: N802 - PySpark's API
        return {"ms": int(time.time() * 1000)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition((start["ms"], end["ms"]))]

    def read(self, partition: InputPartition):  # noqa: ANN201 - an iterator of tuples
        start, end = partition.value
        for ms in range(start, end):
            yield (ms,)


class Latencies(DataSourceStreamWriter):
    """A streaming sink that appends each row's latency (now - its ``ms``) to a file, one line per task."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, iterator) -> WriterCommitMessage:  # noqa: ANN001 - rows
        now = time.time() * 1000
        line = " ".join(f"{now - row.ms:.0f}" for row in iterator)
        if line:
            with open(self.path, "a") as out:
                out.write(line + "\n")
        return WriterCommitMessage()

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - PySpark's API
        pass


SETTINGS = {
    "jvm": ("rate source (JVM) -> noop sink (JVM)", "rate", "noop"),
    "python-source": ("Python source -> noop sink (JVM)", "one_row", "noop"),
    "python-both": ("Python source -> Python sink", "one_row", "one_row"),
    "latency": ("Python clock source -> Python sink, end-to-end latency of each row", "clock", "clock"),
}


def run(spark: SparkSession, source: str, sink: str, warmup: float, seconds: float) -> tuple[list[dict], dict]:
    """The progress of every micro-batch after ``warmup``, and when the first one finished and the process
    tree's memory at the end."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: testing/
    from testing.proctree import memory_by_kind  # reads /proc: nothing of dagger's runs in Spark

    reader = spark.readStream.format(source)
    if source == "rate":
        reader = reader.option("rowsPerSecond", 1000)
    frame = reader.load()
    if source == "rate":
        frame = frame.selectExpr("value AS n")  # the rows of the time a batch took: a few hundred
    checkpoint = tempfile.mkdtemp(prefix="floor-")  # as a job's: its offsets and commits written every batch
    writer = frame.writeStream.format(sink).option("checkpointLocation", checkpoint)
    latencies = Path(checkpoint) / "latencies.txt"
    if sink == "clock":
        writer = writer.option("path", str(latencies))
    query = writer.trigger(processingTime="0 seconds").start()
    try:
        while query.lastProgress is None and query.isActive:
            time.sleep(0.01)
        facts = {"first batch finished, s after launch": round(time.monotonic() - LAUNCHED, 1)}
        time.sleep(warmup)
        first = query.lastProgress["batchId"] if query.lastProgress else -1
        latencies.unlink(missing_ok=True)  # the rows written after the warm-up only
        time.sleep(seconds)
        if sink == "clock":
            values = sorted(float(v) for v in latencies.read_text().split())
            facts["rows"] = len(values)
            facts["latency ms p50 / p99 / max"] = (
                f"{values[len(values) // 2]:.0f} / {values[int(0.99 * (len(values) - 1))]:.0f} / {values[-1]:.0f}"
            )
        kinds = memory_by_kind(os.getpid())
        facts["processes"] = sum(k["processes"] for k in kinds.values())
        facts["RSS summed / PSS, MiB"] = (
            f"{sum(k['rss'] for k in kinds.values()) / 2**20:,.0f} / {sum(k['pss'] for k in kinds.values()) / 2**20:,.0f}"
        )
        return [p for p in query.recentProgress if p["batchId"] > first], facts
    finally:
        query.stop()


def summary(progress: list[dict]) -> dict[str, Any]:
    def stats(values: list[float]) -> str:
        values = sorted(values)
        return f"{statistics.median(values):.0f} / {values[int(0.9 * (len(values) - 1))]:.0f}"

    phases = sorted({k for p in progress for k in p["durationMs"]} - {"triggerExecution"})
    return {
        "batches": len(progress),
        "batch ms p50 / p90": stats([p["batchDuration"] for p in progress]),
        **{f"{k} ms": stats([p["durationMs"].get(k, 0) for p in progress]) for k in phases},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SETTINGS), action="append")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this interpreter (pyspark, pyarrow)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        # a local checkpoint written through Hadoop's FileSystem API, as dagger's jobs do (dagger.session.tuning):
        # its default FileContext writer starts chmod processes without Hadoop's native library, ~40 ms a commit
        .config(
            "spark.sql.streaming.checkpointFileManagerClass",
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"session ready {time.monotonic() - LAUNCHED:.1f} s after launch", flush=True)
    spark.dataSource.register(OneRow)
    spark.dataSource.register(Clock)
    for key in args.only or list(SETTINGS):
        label, source, sink = SETTINGS[key]
        progress, facts = run(spark, source, sink, args.warmup, args.seconds)
        print(label, json.dumps({**summary(progress), **facts}, indent=1), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
