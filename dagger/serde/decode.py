"""Vectorized protobuf → Arrow decoding for input tables.

:class:`ProtoDecoder` turns a list or Arrow binary array of serialized messages into one ``pyarrow.RecordBatch``
shaped exactly like the table's Spark schema (fields, ``__internal_validation_field__``, rowtime). ``ptars`` does the
work in Rust (~1 M messages/s per core). One malformed message makes ptars reject the whole list, so a
failing list is screened message by message with upb, the bad messages are replaced by empty ones
(Dagger's default-instance row, validity ``false``, rowtime at the epoch) and the list is decoded again;
the bad positions and reasons are returned so the source can apply its invalid-record policy.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from dagger.serde.reference import field_value
from dagger.serde.types import (
    contains_json_type,
    message_struct,
    table_schema,
    timestamp_field,
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def ptars_config():  # noqa: ANN201 - ptars is imported lazily
    """The ptars settings closest to Spark's Arrow layout."""
    from ptars import PtarsConfig

    return PtarsConfig(timestamp_unit="us", duration_unit="us", enum_repr="string", list_value_name="element")


def ptars_handler(descriptor: Descriptor):  # noqa: ANN201
    """A ptars message handler for ``descriptor`` (its file and imports registered)."""
    from ptars import HandlerPool

    return HandlerPool([descriptor.file], config=ptars_config()).get_for_message(descriptor)


@dataclass
class DecodeResult:
    """A decoded batch plus the positions (in the input list) of records that could not be decoded."""

    batch: pa.RecordBatch
    invalid: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def validity_and_rowtime(n: int, invalid: list[int], rowtime: pa.Array | None) -> list[pa.Array]:
    """The two columns every input table ends with: the validity flag (false at ``invalid``) and rowtime
    (``rowtime``, a UTC microsecond timestamp column or None for a table without one; the epoch where it is null
    and for invalid records, as Dagger's default-instance row has)."""
    mask = np.ones(n, dtype=bool)
    mask[invalid] = False
    validity = pa.array(mask)
    if rowtime is None:
        return [validity, pa.nulls(n, pa.timestamp("us", tz="UTC"))]
    epoch = pa.scalar(_EPOCH, pa.timestamp("us", tz="UTC"))
    rowtime = pc.fill_null(rowtime, epoch)
    if invalid:
        rowtime = pc.if_else(validity, rowtime, epoch)
    return [validity, rowtime]


class ProtoDecoder:
    """Decode serialized messages of one type into Arrow batches of the table's Spark schema.

    Parameters
    ----------
    descriptor:
        The message type of the records.
    rowtime_field_number:
        Proto field number of the Timestamp that becomes rowtime, or ``None`` for a table without one.
    rowtime:
        Name of the rowtime column.
    """

    def __init__(self, descriptor: Descriptor, rowtime_field_number: int | None, rowtime: str = "rowtime"):
        self.descriptor = descriptor
        self.rowtime = rowtime
        self.rowtime_source = (
            timestamp_field(descriptor, rowtime_field_number).name if rowtime_field_number is not None else None
        )
        self.spark_schema: StructType = table_schema(descriptor, rowtime)
        self.arrow_schema: pa.Schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        self.fields_schema: pa.Schema = to_arrow_schema(message_struct(descriptor), timezone="UTC")
        self._handler = ptars_handler(descriptor)
        self._message_class = message_factory.GetMessageClass(descriptor)
        self._json_fields = [
            f for f in descriptor.fields if f.message_type is not None and contains_json_type(f.message_type)
        ]
        self._json_field_names = {f.name for f in self._json_fields}

    # -- the hot path ---------------------------------------------------------------------------------

    def decode(self, values: list[bytes | None] | pa.BinaryArray) -> DecodeResult:
        """Decode ``values`` (``None`` is a tombstone and counts as invalid) into one batch.

        A ``pyarrow.BinaryArray`` without nulls goes to ptars as it is, with no Python object per message;
        only a batch that holds a tombstone or a malformed message is turned into a list to be screened.
        """
        if isinstance(values, pa.Array):
            if values.null_count == 0:
                try:
                    raw = self._handler.array_to_record_batch(values)
                except ValueError:
                    pass
                else:
                    return DecodeResult(self._to_table(raw, values, []))
            values = values.to_pylist()
        invalid: list[int] = []
        reasons: list[str] = []
        payloads = values
        if any(v is None for v in values):
            payloads = list(values)
            for i, v in enumerate(values):
                if v is None:
                    payloads[i] = b""
                    invalid.append(i)
                    reasons.append("record value is null (tombstone)")
        try:
            raw = self._handler.list_to_record_batch(payloads)
        except ValueError:
            payloads, bad, why = self._screen(payloads, set(invalid))
            invalid.extend(bad)
            reasons.extend(why)
            order = sorted(range(len(invalid)), key=invalid.__getitem__)
            invalid = [invalid[i] for i in order]
            reasons = [reasons[i] for i in order]
            raw = self._handler.list_to_record_batch(payloads)
        return DecodeResult(self._to_table(raw, payloads, invalid), invalid, reasons)

    def _screen(self, payloads: list[bytes], known: set[int]) -> tuple[list[bytes], list[int], list[str]]:
        """Find the messages ptars rejects; return the list with those replaced by empty messages."""
        payloads = list(payloads)
        bad: list[int] = []
        reasons: list[str] = []
        parse = self._message_class.FromString
        for i, value in enumerate(payloads):
            if i in known:
                continue
            try:
                parse(value)
            except DecodeError as exc:
                bad.append(i)
                reasons.append(f"not a valid {self.descriptor.full_name}: {exc}")
                payloads[i] = b""
        try:
            self._handler.list_to_record_batch(payloads)
        except ValueError:
            # upb accepted something ptars rejects: isolate it with ptars itself, one message at a time
            for i, value in enumerate(payloads):
                if i in known or i in bad:
                    continue
                try:
                    self._handler.list_to_record_batch([value])
                except ValueError as exc:
                    bad.append(i)
                    reasons.append(f"not a valid {self.descriptor.full_name}: {exc}")
                    payloads[i] = b""
        return payloads, bad, reasons

    def _to_table(
        self, raw: pa.RecordBatch, payloads: list[bytes] | pa.BinaryArray, invalid: list[int]
    ) -> pa.RecordBatch:
        n = raw.num_rows
        columns = []
        if self._json_field_names and isinstance(payloads, pa.Array):
            payloads = payloads.to_pylist()  # the Struct/Value fields are converted message by message
        for target in self.fields_schema:
            if target.name in self._json_field_names:
                columns.append(self._slow_column(target, payloads))
                continue
            # ptars emits fields in field-number order, the table has them in declaration order: match by name
            # (nested structs too: Arrow's struct cast matches children by name)
            column = raw.column(target.name)
            if column.type != target.type:
                column = column.cast(target.type)
            columns.append(column)
        source = None
        if self.rowtime_source is not None:
            source = columns[self.fields_schema.get_field_index(self.rowtime_source)]
        columns.extend(validity_and_rowtime(n, invalid, source))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)

    def _slow_column(self, target: pa.Field, payloads: list[bytes]) -> pa.Array:
        """Per-message conversion for fields that hold google.protobuf.Struct/Value/ListValue."""
        field_descriptor = self.descriptor.fields_by_name[target.name]
        parse = self._message_class.FromString
        path = (self.descriptor.full_name,)
        values = [field_value(parse(p), field_descriptor, path) for p in payloads]
        return pa.array(values, type=target.type)
