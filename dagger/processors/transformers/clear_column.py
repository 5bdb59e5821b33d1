"""``ClearColumnTransformer``: blank out one column."""

from __future__ import annotations

from typing import Any

from dagger.processors.transformers import register_transformer
from dagger.processors.transformers.base import Transformer


@register_transformer
class ClearColumnTransformer(Transformer):
    """Sets ``targetColumnName`` to the empty string (a missing column is a config error at start)."""

    name = "ClearColumnTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        target = self.column(self.argument("targetColumnName", str), "targetColumnName")
        return df.withColumn(target, F.lit(""))
