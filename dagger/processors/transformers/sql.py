"""``SQLTransformer``: SQL over the post-processed rows, with every function available."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dagger.errors import SqlError
from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer


class SqlArguments(TransformerArguments):
    """SQLTransformer's arguments."""

    sqlQuery: str = Field(description="The query over the rows.")  # noqa: N815 - Dagger's keys
    tableName: str = Field("data_stream", description="The name the rows have in the query.")  # noqa: N815
    allowedLatenessInMs: int = Field(0, description="The watermark delay of `rowtime` in the query.")  # noqa: N815


class SQLTransformer(Transformer):
    """Runs ``sqlQuery`` over the rows registered as ``tableName`` (default ``data_stream``). When the rows have
    a ``rowtime`` column it is the event time again, watermarked with ``allowedLatenessInMs`` (default 0), so
    ``TUMBLE``/``HOP`` windows work on fields added by external or internal sources. The result's columns are
    the output."""

    name = "SQLTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        query = self.settings.sqlQuery
        table = self.settings.tableName
        lateness = self.settings.allowedLatenessInMs
        rowtime = self.context.config.FLINK_ROWTIME_ATTRIBUTE_NAME
        if rowtime in df.columns and df.isStreaming:
            df = _event_time_again(df, rowtime, lateness)
        from pyspark.errors import AnalysisException, ParseException

        try:
            return self.context.sql(query, {table: df})
        except (AnalysisException, ParseException) as exc:
            first = str(exc).strip().splitlines()[0]
            raise SqlError(f"{self.where}: SQLTransformer sqlQuery is not valid Spark SQL: {first}") from None


#: the column metadata by which Spark's stateful operators find a watermarked event-time column
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"


def _event_time_again(df: Any, rowtime: str, lateness_ms: int) -> Any:
    """``rowtime`` as the event time of the transformer's query, watermarked with ``lateness_ms``.

    Past an external lookup or Longbow (the executors' Python, ``mapInArrow``) Spark refuses a second
    ``withWatermark`` on top of the source's ("Redefining watermark is disallowed"). There ``rowtime`` still
    carries the source's watermark (the same values, the column's event-time metadata kept), so the query goes
    on with the source's watermark (``FLINK_WATERMARK_DELAY_MS``) and ``allowedLatenessInMs`` does not apply."""
    if WATERMARK_DELAY_KEY in df.schema[rowtime].metadata and _past_python(df):
        return df
    return df.withWatermark(rowtime, f"{lateness_ms} milliseconds")


def _past_python(df: Any) -> bool:
    """Whether ``df``'s rows went through the executors' Python (``mapInArrow``) after the source's watermark."""
    plan = df._jdf.queryExecution().logical().toString()  # noqa: SLF001 - the JVM plan, as Spark prints it
    return "MapInArrow" in plan and "EventTimeWatermark" in plan


register_transformer("SQLTransformer", SqlArguments, SQLTransformer)
