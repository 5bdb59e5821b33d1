"""A stream's table, whatever its format: the columns of its records (:meth:`~dagger.plugins.format.Format.record_struct`),
the validity flag, then rowtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagger.plugins.format import format_of

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from dagger.config.model import StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet


def stream_table(stream: StreamConfig, descriptors: DescriptorSet, rowtime: str) -> StructType:
    """Every column of a stream's table: its records' columns, the validity flag, then rowtime."""
    from dagger.serde.types import input_table  # start-up: loads google

    records = format_of(stream)
    where = f"STREAMS[{stream.INPUT_SCHEMA_TABLE}].INPUT_DATATYPE ({records.owner(stream, descriptors)})"
    return input_table(records.record_struct(stream, descriptors), rowtime, where)
