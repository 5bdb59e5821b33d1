"""``InvalidRecordFilterTransformer``: drop the rows a source could not decode, counted."""

from __future__ import annotations

from typing import Any

from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
from dagger.serde.types import VALIDITY_COLUMN


class InvalidRecordFilterTransformer(Transformer):
    """Removes rows whose ``__internal_validation_field__`` is false and counts them as
    ``filtered_invalid_records_<table>`` (Dagger's ``filtered_invalid_records`` counter, per table).

    A stream with this pre-processor and no explicit ``SOURCE_KAFKA_INVALID_RECORD_POLICY`` passes undecodable
    records on to it (Dagger's behaviour) instead of failing on them.
    """

    name = "InvalidRecordFilterTransformer"
    stages = ("pre",)

    def transform(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        if VALIDITY_COLUMN not in self.columns:
            return df
        counted = self.context.observe(
            df,
            f"filtered_invalid_records_{self.context.table_name}",
            F.count(F.when(~F.col(VALIDITY_COLUMN), 1)).alias("count"),
        )
        return counted.where(F.col(VALIDITY_COLUMN))


register_transformer("InvalidRecordFilterTransformer", TransformerArguments, InvalidRecordFilterTransformer)
