"""``ClearColumnTransformer``: blank out one column."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
from dagger.session.pandas_free import lit


class ClearColumnArguments(TransformerArguments):
    """ClearColumnTransformer's arguments."""

    targetColumnName: str = Field(description="The column set to the empty string.")  # noqa: N815 - Dagger's key


class ClearColumnTransformer(Transformer):
    """Sets ``targetColumnName`` to the empty string (a missing column is a config error at start)."""

    name = "ClearColumnTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        target = self.column(self.settings.targetColumnName, "targetColumnName")
        return df.withColumn(target, lit(""))


register_transformer("ClearColumnTransformer", ClearColumnArguments, ClearColumnTransformer)
