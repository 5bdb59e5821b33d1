"""``SQLTransformer``: SQL over the post-processed rows, with every function available."""

from __future__ import annotations

from typing import Any

from dagger.processors.transformers import register_transformer
from dagger.processors.transformers.base import Transformer


@register_transformer
class SQLTransformer(Transformer):
    """Runs ``sqlQuery`` over the rows registered as ``tableName`` (default ``data_stream``). When the rows have
    a ``rowtime`` column it is the event time again, watermarked with ``allowedLatenessInMs`` (default 0), so
    ``TUMBLE``/``HOP`` windows work on fields added by external or internal sources. The result's columns are
    the output."""

    name = "SQLTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        query = self.argument("sqlQuery", str)
        table = self.argument("tableName", str, "data_stream")
        lateness = self.argument("allowedLatenessInMs", int, 0)
        rowtime = self.context.config.FLINK_ROWTIME_ATTRIBUTE_NAME
        if rowtime in df.columns and df.isStreaming:
            df = df.withWatermark(rowtime, f"{lateness} milliseconds")
        from pyspark.errors import AnalysisException, ParseException

        from dagger.errors import SqlError

        try:
            return self.context.sql(query, {table: df})
        except (AnalysisException, ParseException) as exc:
            first = str(exc).strip().splitlines()[0]
            raise SqlError(f"{self.where}: SQLTransformer sqlQuery is not valid Spark SQL: {first}") from None
