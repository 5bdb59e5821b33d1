"""``FeatureTransformer`` and ``FeatureWithTypeTransformer``: Feast feature rows from columns.

The rows have the shape of the ``Features`` functions (docs/functions.md): ``STRUCT<name, value STRUCT<bytes_val,
string_val, int32_val, int64_val, double_val, float_val, bool_val, timestamp_val>, key>``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer

_VIEW = "__dagger_feature_rows"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class FeatureArguments(TransformerArguments):
    """FeatureTransformer's arguments."""

    keyColumnName: str = Field(description="The column whose value names the feature.")  # noqa: N815 - Dagger's
    valueColumnName: str = Field(description="The column replaced by the feature row.")  # noqa: N815


class FeatureWithTypeArguments(TransformerArguments):
    """FeatureWithTypeTransformer's arguments."""

    outputColumnName: str = Field(description="The column that receives the feature rows.")  # noqa: N815
    data: list = Field(description="`{keyColumnName, valueColumnName, type}` of each feature.")


class FeatureTransformer(Transformer):
    """Replaces ``valueColumnName`` with ``[feature row(name = keyColumnName's value, value)]``; the value slot
    follows the value's SQL type."""

    name = "FeatureTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        key = _quote(self.column(self.settings.keyColumnName, "keyColumnName"))
        value_name = self.column(self.settings.valueColumnName, "valueColumnName")
        value = _quote(value_name)
        row = f"array(__Feature({key}, typeof({value}), to_json(named_struct('v', {value}))))"
        return _replace(self, df, value_name, row)


class FeatureWithTypeTransformer(Transformer):
    """Writes ``[feature row for each {keyColumnName, valueColumnName, type} of data]`` into
    ``outputColumnName`` (which must exist, e.g. from a constant internal source)."""

    name = "FeatureWithTypeTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        from udfs.aggregates import FEATURE_TYPES

        output = self.column(self.settings.outputColumnName, "outputColumnName")
        data = self.settings.data
        rows = []
        for i, item in enumerate(data):
            if not isinstance(item, dict) or not {"keyColumnName", "valueColumnName", "type"} <= set(item):
                raise DaggerConfigError(
                    f"{self.where}: {self.name} data[{i}] must be an object with keyColumnName, valueColumnName "
                    f"and type, got {item!r}"
                )
            if item["type"] not in FEATURE_TYPES:
                raise DaggerConfigError(
                    f"{self.where}: {self.name} data[{i}].type {item['type']!r} is not a feature type; accepted: "
                    + ", ".join(FEATURE_TYPES)
                )
            key = _quote(self.column(item["keyColumnName"], f"data[{i}].keyColumnName"))
            value = _quote(self.column(item["valueColumnName"], f"data[{i}].valueColumnName"))
            rows.append(f"__Feature({key}, '{item['type']}', to_json(named_struct('v', {value})))")
        return _replace(self, df, output, f"array({', '.join(rows)})")


def _replace(transformer: Transformer, df: Any, column: str, expression: str) -> Any:
    """``df`` with ``column`` replaced by a SQL expression that may use the function library."""
    select = ", ".join(f"{expression} AS {_quote(c)}" if c == column else _quote(c) for c in df.columns)
    return transformer.context.sql(f"SELECT {select} FROM {_VIEW}", {_VIEW: df})


register_transformer("FeatureTransformer", FeatureArguments, FeatureTransformer)
register_transformer("FeatureWithTypeTransformer", FeatureWithTypeArguments, FeatureWithTypeTransformer)
