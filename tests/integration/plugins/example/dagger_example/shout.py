"""``ShoutTransformer``: upper-cases a column."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from dagger.plugins.transformer import Transformer, TransformerArguments


class ShoutArguments(TransformerArguments):
    """ShoutTransformer's arguments."""

    column: str


class Shout(Transformer):
    """Upper-cases ``column``."""

    name = "ShoutTransformer"
    settings_model = ShoutArguments

    def transform(self, df: Any) -> Any:
        column = self.column(self.settings.column, "column")
        return df.withColumn(column, F.upper(column))
