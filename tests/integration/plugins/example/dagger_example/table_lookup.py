"""``external_source.table``: answers from a table written in the config (a lookup with no server)."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pyspark.sql import functions as F

from dagger.plugins.lookup import Lookup, LookupSettings


class TableSettings(LookupSettings):
    """A table of answers in the config."""

    key: str = Field(description="The SQL column whose value is looked up.")
    rows: dict[str, str] = Field(description="Key → answer.")
    output: str = Field(description="The output column.")


class TableLookup(Lookup):
    """Answers from a table in the config."""

    settings_model = TableSettings

    def plan(self, df: Any) -> tuple[Any, list[tuple[str, str]]]:
        table = F.create_map(*[F.lit(part) for row in self.settings.rows.items() for part in row])
        column = self.hidden_column(self.settings.output)
        return df.withColumn(column, table[F.col(self.settings.key).cast("string")]), [(self.settings.output, column)]
