"""What PySpark's stateful operators cost per key, before any work of ours (``make bench-longbow`` runs it).

Why Longbow on the state store (:mod:`dagger.longbow.state`) runs in the JVM: Python's ``transformWithState``
calls a Python worker once per key per micro-batch. This measures the floor of that path, and of
``applyInPandasWithState``, with nothing of Dagger in it: ``BENCH_FLOOR_BATCHES`` micro-batches of 3,000 rows over 1,000 keys (Parquet files read one
per trigger, written to Spark's ``noop`` sink), through

- ``plain``: no stateful operator;
- ``transformWithState``: each key's rows handed back as they came, no state call;
- ``transformWithState, get + append``: the same with one list-state read and one append per key, as Longbow's;
- ``applyInPandasWithState``: each key's rows handed back, a small value state updated.

The median of ``BENCH_FLOOR_RUNS`` runs (after one warm-up run) of each, in rows/s and as a fraction of plain.
Writes ``bench/results/stateful_floor.json`` and ``.md`` (``BENCH_RESULTS_DIR``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR", str(ROOT / "bench" / "results")))
ROWS, KEYS = 3000, 1000
BATCHES = int(os.environ.get("BENCH_FLOOR_BATCHES", "10"))
RUNS = int(os.environ.get("BENCH_FLOOR_RUNS", "3"))
MODES = {
    "plain": "no stateful operator",
    "tws": "`transformWithState`, no state call",
    "tws-state": "`transformWithState`, one list-state get + one append per key (Longbow's calls)",
    "pandas": "`applyInPandasWithState`, a value state updated per key",
}


def main() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    source = tempfile.mkdtemp(prefix="bench-floor-")
    for b in range(BATCHES):
        at = range(b * ROWS, (b + 1) * ROWS)
        table = pa.table({"k": [f"k{i % KEYS}" for i in at], "v": [str(i) for i in at], "t": list(at)})
        pq.write_table(table, f"{source}/part-{b:03d}.parquet")
    schema = StructType([StructField("k", StringType()), StructField("v", StringType()), StructField("t", LongType())])
    chunk = StructType([StructField("c", StringType())])

    class Rows(StatefulProcessor):
        """Hands a key's rows back; with ``calls``, reads and appends to its list as Longbow does."""

        def __init__(self, calls: bool):
            self.calls = calls

        def init(self, handle) -> None:  # noqa: ANN001
            self.history = handle.getListState("history", chunk, 86_400_000)

        def handleInputRows(self, key, rows, timerValues):  # noqa: ANN001, ANN201, N802, N803 - Spark's API
            rows = list(rows)
            if self.calls:
                list(self.history.get())
                self.history.appendValue(("x" * 50,))
            return iter(rows)

        def close(self) -> None:
            return None

    def pandas_rows(key, frames, state):  # noqa: ANN001, ANN202
        state.update(((state.get[0] if state.exists else "")[-1000:] + "x" * 50,))
        yield from frames

    def run(mode: str) -> float:
        df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
        if mode.startswith("tws"):
            df = df.groupBy("k").transformWithState(
                statefulProcessor=Rows(mode == "tws-state"),
                outputStructType=schema,
                outputMode="Append",
                timeMode="ProcessingTime",
            )
        elif mode == "pandas":
            df = df.groupBy("k").applyInPandasWithState(
                pandas_rows, schema, chunk, "append", GroupStateTimeout.NoTimeout
            )
        began = time.monotonic()
        query = df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp()).start()
        while query.isActive:  # a processing-time operator asks for batches forever: stop once all is read
            query.awaitTermination(0.2)
            if sum(p["numInputRows"] for p in query.recentProgress) >= ROWS * BATCHES:
                query.stop()
        return ROWS * BATCHES / (time.monotonic() - began)

    for mode in MODES:
        run(mode)  # warm-up
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    for i in range(RUNS):
        for mode in MODES:
            results[mode].append(run(mode))
            print(f"[floor] run {i + 1} {mode}: {results[mode][-1]:,.0f} rows/s", flush=True)
    medians = {mode: round(statistics.median(values)) for mode, values in results.items()}
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "stateful_floor.json").write_text(json.dumps({"machine": machine, "rows_per_s": medians}) + "\n")
    lines = [
        "# PySpark's stateful operators: the floor per key",
        "",
        f"Generated by `bench/stateful_floor.py` on {machine}: {BATCHES} micro-batches of {ROWS:,} rows over"
        f" {KEYS:,} keys, median of {RUNS} runs.",
        "",
        "| operator | rows/s | of plain |",
        "|---|---|---|",
        *(f"| {MODES[m]} | {v:,} | {v / medians['plain']:.2f}× |" for m, v in medians.items()),
        "",
    ]
    (RESULTS / "stateful_floor.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
