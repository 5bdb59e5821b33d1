"""Classic Longbow on Spark's own state (``PROCESSOR_LONGBOW_STORE=state``): no Bigtable, the same SQL and output.

Each key's history is a list in Spark's state store (``transformWithState``, RocksDB provider), checkpointed with
the job like any other state, kept by a JVM processor (``dagger/jvm/StateHistory.java``, compiled by
:mod:`dagger.session.jars`): Python's ``transformWithState`` calls a Python worker once per key per micro-batch
with four round trips to the state server, which alone holds a job to a third of its speed without Longbow
(bench/results/stateful_floor.md). An element of the list is an entry ``(ms, values)``: a row's rowtime in epoch
milliseconds and its ``longbow_data*`` values. A row is added to its key's history, then its ``longbow_data*``
columns are replaced by the values over its range, most recent first, both ends inclusive, exactly as the
Bigtable store gives them (:mod:`dagger.longbow.classic`). A row with the same key and rowtime as an earlier one
replaces it, as a Bigtable row with the same row key is overwritten.

Writing appends: a micro-batch appends its rows' entries to each key it touches, so its cost follows the batch,
not the history. What bounds the state:

- entries older than ``PROCESSOR_LONGBOW_DOCUMENT_DURATION`` before the key's newest rowtime are never read
  again, and the list is rewritten without them (and without replaced entries) once they outnumber the live ones:
  each entry is rewritten a bounded number of times (Bigtable's max-age rule counts from the wall clock instead);
- an entry nobody appended for that long is forgotten (each list element's TTL, in processing time), so a key
  that gets no rows goes away.

Longbow+ needs a table several jobs share, so it stays on Bigtable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.longbow.schema import DURATION, EARLIEST, LATEST, LongbowSchema, duration_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagger.config.model import JobConfig
    from dagger.longbow.classic import LongbowMetrics

#: the JVM processor's class (its ``COUNTERS`` name the counters it adds to, in the order it takes them)
PROCESSOR = "dagger.longbow.StateHistory"


class _JvmCounter:
    """A JVM ``LongAccumulator`` read as a PySpark accumulator is (``.value`` on the driver)."""

    def __init__(self, accumulator: Any):
        self.accumulator = accumulator

    @property
    def value(self) -> int:
        return int(self.accumulator.value())


def state_longbow(df: DataFrame, schema: LongbowSchema, config: JobConfig, metrics: LongbowMetrics) -> DataFrame:
    """``df`` with its ``longbow_data*`` columns replaced by their histories, kept in Spark's state store; runs on
    the driver, planning the JVM processor."""
    from py4j.java_gateway import JavaClass
    from pyspark.sql import DataFrame as PyDataFrame

    spark = df.sparkSession
    processor = spark._jvm
    for part in PROCESSOR.split("."):
        processor = getattr(processor, part)
    if not isinstance(processor, JavaClass):
        raise DaggerConfigError(
            "PROCESSOR_LONGBOW_STORE=state: Dagger's JVM classes (dagger-jvm-*.jar) are not on this session's class "
            "path; `make jars` (python -m dagger.session.jars fetch) builds them beside Spark's connectors, and "
            "`python -m dagger.session.jars helper` prints the jar for spark-submit --jars"
        )
    keep_ms = duration_ms(config.PROCESSOR_LONGBOW_DOCUMENT_DURATION, "PROCESSOR_LONGBOW_DOCUMENT_DURATION")
    counters = processor.counters(spark._jsparkSession)
    for i, name in enumerate(processor.COUNTERS):
        metrics.counters[name] = _JvmCounter(counters[i])
    data = spark._sc._gateway.new_array(spark._jvm.java.lang.String, len(schema.data_columns))
    for i, column in enumerate(schema.data_columns):
        data[i] = column
    duration = schema.range == "duration"
    planned = processor.apply(
        df._jdf,
        schema.key,
        schema.rowtime,
        data,
        DURATION if duration else None,
        None if duration else EARLIEST,
        None if duration else LATEST,
        keep_ms,
        counters,
    )
    return PyDataFrame(planned, spark)
