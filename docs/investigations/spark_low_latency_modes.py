"""What Spark 4.3's two low-latency options do with a query that reads a Python data source.

**Asynchronous progress tracking cannot stop it.** Nothing of dagger's is in the path: a ten-line Python streaming source (PySpark's own API), a ``noop`` sink,
``asyncProgressTrackingEnabled`` with the override of Spark's sink check. ``query.stop()`` runs
``AsyncProgressTrackingMicroBatchExecution.cleanup``, which commits every source's latest offsets *after* the
sources were stopped: the Python source's runner is gone, the commit fails with ``ClosedChannelException`` on
the stream thread, and the stopped query stays listed in ``spark.streams.active`` (in the test suite a query
of the same name then could not start again: "a query with that name is already active", which is how a
schema refresh restarts its query). Without async progress tracking the same query stops cleanly.
Seen on 2026-11-25 with pyspark 4.3.0: exit 1 (async: ``still active: ['repro']``), exit 0 with ``--sync``.

**Real-time mode refuses it**: ``trigger(realTime=...)`` fails at start with
``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED`` ("The input stream ... PythonMicroBatchStream is not
supported in Real-time Mode"; the sink allowlist check turned off, so the source is what is refused). Its
sources implement a JVM interface PySpark's data source API does not reach. Exit 1 with ``--real-time``.

    .venv/bin/python docs/investigations/spark_low_latency_modes.py              # async: the stopped query stays active
    .venv/bin/python docs/investigations/spark_low_latency_modes.py --sync       # Spark's default: it does not
    .venv/bin/python docs/investigations/spark_low_latency_modes.py --real-time  # real-time mode: the source is refused
"""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

CYCLES = 5


class Counter(DataSource):
    @classmethod
    def name(cls) -> str:
        return "counter"

    def schema(self) -> str:
        return "n long"

    def streamReader(self, schema):  # noqa: ANN001, ANN201
        return CounterReader()


class CounterReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self) -> dict:
        return {"n": int(time.time() * 10)}

    def partitions(self, start: dict, end: dict) -> list:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition):  # noqa: ANN001, ANN201
        low, high = partition.value
        for n in range(max(low, high - 10), high):
            yield (n,)


def run(spark: SparkSession, asynchronous: bool, checkpoint: str) -> bool:
    """Start the query, let it run three micro-batches, stop it; whether it is gone from the active queries."""
    writer = spark.readStream.format("counter").load().writeStream.format("noop").queryName("repro")
    writer = writer.option("checkpointLocation", checkpoint)
    if asynchronous:
        writer = writer.option("asyncProgressTrackingEnabled", "true").option(
            "_asyncProgressTrackingOverrideSinkSupportCheck", "true"
        )
    query = writer.start()
    while (query.lastProgress or {}).get("batchId", -1) < 3:
        time.sleep(0.2)
    query.stop()
    active = [q.name for q in spark.streams.active]
    print(f"stopped after batch {query.lastProgress['batchId']}; still active: {active}")
    return not active


def real_time(spark: SparkSession, checkpoint: str) -> bool:
    """Start the query with a real-time trigger; whether it ran."""
    writer = spark.readStream.format("counter").load().writeStream.format("noop").outputMode("update")
    query = writer.option("checkpointLocation", checkpoint).trigger(realTime="5 seconds").start()
    try:
        query.processAllAvailable()
    except Exception as exc:  # noqa: BLE001 - the point of the script
        print(f"real-time mode: {str(exc).splitlines()[0][:500]}")
        return False
    query.stop()
    print("real-time mode ran the query")
    return True


def main() -> None:
    import tempfile

    asynchronous = "--sync" not in sys.argv
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = builder.config("spark.sql.streaming.realTimeMode.allowlistCheck", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(Counter)
    checkpoint = tempfile.mkdtemp()
    if "--real-time" in sys.argv:
        sys.exit(0 if real_time(spark, checkpoint) else 1)
    stuck = 0
    for _ in range(CYCLES):  # the failure is a race: start and stop the query several times on one checkpoint
        try:
            stuck += not run(spark, asynchronous, checkpoint)
        except Exception as exc:  # noqa: BLE001 - the point of the script
            print(f"the query could not start again: {str(exc).splitlines()[0]}")
            stuck += 1
            break
    print(f"{stuck} of the stops left the query active or unable to start again")
    sys.exit(1 if stuck else 0)


if __name__ == "__main__":
    main()
