"""``DeDuplicationTransformer``: the first row per key passes; later ones are dropped until the key's TTL expires."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
from dagger.session.tuning import ROCKSDB_STATE_STORE as ROCKSDB
from dagger.session.tuning import STATE_STORE_PROVIDER


class DeDuplicationArguments(TransformerArguments):
    """DeDuplicationTransformer's arguments."""

    key_column: str = Field(description="The column whose value identifies a row.")
    ttl_in_seconds: int = Field(description="How long a key is remembered after its first row.")


class DeDuplicationTransformer(Transformer):
    """Passes the first row of each ``key_column`` value and drops the rest for ``ttl_in_seconds`` (processing
    time, from when the key was first seen), as Dagger's keyed state with TTL does.

    Streaming jobs keep one value per key in Spark's state store (``transformWithState`` with a state
    TTL, RocksDB provider), so the state does not grow without bound: an expired key is forgotten and its next
    row passes again. Bounded jobs keep the earliest row (by ``rowtime``) of each key. The key is compared as a
    string (Dagger casts it to String).
    """

    name = "DeDuplicationTransformer"

    def transform(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        key = self.column(self.settings.key_column, "key_column")
        ttl = self.settings.ttl_in_seconds
        if ttl <= 0:
            raise DaggerConfigError(f"{self.where}: DeDuplicationTransformer ttl_in_seconds must be > 0, got {ttl}")
        keyed = df.withColumn("__dedup_key", F.col(key).cast("string"))
        if not df.isStreaming:
            from pyspark.sql import Window

            rowtime = self.context.config.FLINK_ROWTIME_ATTRIBUTE_NAME
            order = F.col(rowtime) if rowtime in df.columns else F.monotonically_increasing_id()
            ranked = keyed.withColumn(
                "__dedup_rank", F.row_number().over(Window.partitionBy("__dedup_key").orderBy(order))
            )
            return ranked.where("__dedup_rank = 1").drop("__dedup_rank", "__dedup_key")
        self.context.session_settings[STATE_STORE_PROVIDER] = ROCKSDB
        return keyed.groupBy("__dedup_key").transformWithState(
            statefulProcessor=_FirstPerKey(ttl * 1000, df.columns),
            outputStructType=df.schema,
            outputMode="Append",
            timeMode="ProcessingTime",
        )


def _processor_base() -> type:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return StatefulProcessor


class _FirstPerKey(_processor_base()):  # type: ignore[misc]
    """Keeps a "seen" flag per key with a TTL; emits a key's first row while the flag is absent."""

    def __init__(self, ttl_ms: int, columns: list[str]):
        self.ttl_ms = ttl_ms
        self.columns = columns

    def init(self, handle: Any) -> None:
        from pyspark.sql.types import BooleanType, StructField, StructType

        self.seen = handle.getValueState("seen", StructType([StructField("v", BooleanType())]), self.ttl_ms)

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - Spark's API
        from pyspark.sql import Row

        first = next(iter(rows), None)
        if first is None or self.seen.exists():
            return iter(())
        self.seen.update((True,))
        values = first.asDict(recursive=False)
        return iter([Row(**{c: values[c] for c in self.columns})])

    def close(self) -> None:
        return None


register_transformer("DeDuplicationTransformer", DeDuplicationArguments, DeDuplicationTransformer)
