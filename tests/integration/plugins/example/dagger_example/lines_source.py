"""``LINES_SOURCE``: a file of JSON records, one per line, read whole as a bounded stream."""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dagger.formats.table import stream_table
from dagger.plugins.format import VALIDITY_COLUMN, format_of
from dagger.plugins.source import Source, SourceEnv, SourceSettings


class LinesSettings(SourceSettings):
    """A file of JSON records, one per line."""

    SOURCE_LINES_PATH: str = Field(description="The file.")


class LinesSource(Source):
    """A file of JSON records, one per line, read whole (a bounded stream)."""

    names = ("LINES_SOURCE",)
    source_type = "BOUNDED"
    settings_model = LinesSettings
    formats = ("JSON",)
    formats_rule = "its lines are JSON records"

    def is_bounded(self, stream: Any, to_ms: int | None = None) -> bool:
        return True

    def location(self, stream: Any) -> str:
        return f"file {stream.settings.SOURCE_LINES_PATH}"

    def input_description(self, spark: Any, stream: Any, from_ms: int | None, to_ms: int | None) -> dict[str, Any]:
        path = stream.settings.SOURCE_LINES_PATH
        return {"path": path, "bytes": os.path.getsize(path)}

    def build(self, stream: Any, env: SourceEnv) -> DataFrame:
        rowtime = env.config.FLINK_ROWTIME_ATTRIBUTE_NAME
        table = stream_table(stream, env.descriptors, rowtime)
        records = format_of(stream)
        parsed = env.spark.read.text(stream.settings.SOURCE_LINES_PATH).select(
            F.from_json("value", records.record_struct(stream, env.descriptors)).alias("record")
        )
        time = records.rowtime_field(stream)
        return parsed.select("record.*", F.lit(True).alias(VALIDITY_COLUMN), F.col(f"record.{time}").alias(rowtime)).to(
            table
        )
