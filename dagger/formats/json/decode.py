"""Vectorized JSON → Arrow decoding for input tables (``INPUT_DATATYPE=JSON``).

:class:`JsonDecoder` turns an Arrow binary array (or a list) of JSON records into one ``pyarrow.RecordBatch`` shaped
like the table's Spark schema (the JSON Schema's properties, ``__internal_validation_field__``, rowtime), with the
same contract as :class:`~dagger.serde.decode.ProtoDecoder`. The records are joined into one newline-delimited
buffer and read by Arrow's JSON reader against the schema: no Python object per record.

Arrow rejects a whole buffer for one bad record, so a failing buffer is split in halves until the bad records are
alone (a few reads per bad record); each becomes an all-null row with validity ``false`` and rowtime at the epoch,
and its position and reason are returned for the source's invalid-record policy. A record is bad when it is not
one JSON object (malformed, an array, two objects, empty, a tombstone), when a value has the wrong type for its
property (a string where the schema says ``integer``, an unparsable ``date-time``), or when it lacks the rowtime
field. Properties the schema does not declare are ignored, as Flink's ``JsonRowDeserializationSchema`` does.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, LongType, StructType, TimestampType

from dagger.formats.json.schema import JsonSchemaError, json_struct
from dagger.serde.decode import DecodeResult, validity_and_rowtime
from dagger.serde.types import input_table

_NEWLINE = pa.scalar(b"\n", pa.binary())


class _Miscount(ValueError):
    """A record that reads as other than one object."""


def rowtime_type(struct: StructType, field: str, where: str) -> DataType:
    """The type of the rowtime property ``field``: a ``date-time`` string or a number of epoch seconds."""
    if field not in struct.fieldNames():
        raise JsonSchemaError(
            f"{where}: the schema has no property {field!r}; its properties: {', '.join(struct.fieldNames())}"
        )
    kind = struct[field].dataType
    if kind.typeName() not in ("timestamp", "long", "double"):
        raise JsonSchemaError(
            f"{where}: property {field!r} is {kind.simpleString()}; the rowtime must be a string with "
            '"format": "date-time" or a number of epoch seconds ("integer" or "number")'
        )
    return kind


def _read_type(arrow: pa.DataType) -> pa.DataType:
    """The type Arrow's JSON reader reads a column as before it is cast to ``arrow``: timestamps at nanoseconds (so
    RFC 3339 fractions up to nanoseconds parse), dates as timestamps (the reader has no date parser)."""
    if pa.types.is_timestamp(arrow) or pa.types.is_date(arrow):
        return pa.timestamp("ns", tz="UTC")
    if pa.types.is_struct(arrow):
        return pa.struct([pa.field(f.name, _read_type(f.type)) for f in arrow])
    if pa.types.is_list(arrow):
        return pa.list_(pa.field(arrow.value_field.name, _read_type(arrow.value_type)))
    return arrow


class JsonDecoder:
    """Decode JSON records described by a JSON Schema into Arrow batches of the table's Spark schema.

    Parameters
    ----------
    schema:
        The JSON Schema (text or parsed) of the records.
    rowtime_field:
        The top-level property that becomes rowtime (``INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME``), or ``None``.
    rowtime:
        Name of the rowtime column.
    fields:
        The properties to read (the others are skipped unread); ``None``: all.
    """

    def __init__(
        self, schema: str | dict, rowtime_field: str | None, rowtime: str = "rowtime", fields: list[str] | None = None
    ):
        struct = json_struct(schema)
        if rowtime_field is not None:
            rowtime_type(struct, rowtime_field, "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME")
        if fields is not None:
            wanted = set(fields) | ({rowtime_field} if rowtime_field else set())
            struct = StructType([f for f in struct.fields if f.name in wanted])
        self.rowtime = rowtime
        self.rowtime_source = rowtime_field
        self.fields_schema: pa.Schema = to_arrow_schema(struct, timezone="UTC")
        self.spark_schema: StructType = input_table(struct, rowtime, "the JSON Schema")
        self.arrow_schema: pa.Schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        self._read_schema = pa.schema([pa.field(f.name, _read_type(f.type)) for f in self.fields_schema])
        self._parse = pj.ParseOptions(
            explicit_schema=self._read_schema, unexpected_field_behavior="ignore", newlines_in_values=True
        )
        self._empty = pa.Table.from_pylist([{}], schema=self._read_schema)
        self._rowtime_kind = struct[rowtime_field].dataType if rowtime_field else None

    # -- the hot path ---------------------------------------------------------------------------------

    def decode(self, values: list[bytes | None] | pa.Array) -> DecodeResult:
        """Decode ``values`` (``None`` is a tombstone and counts as invalid) into one batch."""
        array = values if isinstance(values, pa.Array) else pa.array(values, pa.binary())
        invalid: dict[int, str] = {}
        if array.null_count:
            for i in np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)):
                invalid[int(i)] = "record value is null (tombstone)"
            array = pc.fill_null(array, pa.scalar(b"{}", array.type))
        pieces: list[pa.Table] = []
        self._read(array, 0, pieces, invalid)
        table = pa.concat_tables(pieces) if len(pieces) != 1 else pieces[0]
        positions = sorted(invalid)
        if self.rowtime_source is not None:  # a record without its rowtime is invalid
            missing = table.column(self.rowtime_source).is_null().to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(missing):
                if int(i) not in invalid:
                    invalid[int(i)] = f"has no {self.rowtime_source} (the rowtime)"
            positions = sorted(invalid)
        return DecodeResult(self._to_batch(table, positions), positions, [invalid[i] for i in positions])

    def _read(self, array: pa.Array, offset: int, pieces: list[pa.Table], invalid: dict[int, str]) -> None:
        try:
            pieces.append(self._read_all(array))
        except (pa.ArrowInvalid, _Miscount) as exc:
            if len(array) == 1:
                pieces.append(self._empty)
                invalid.setdefault(offset, f"not a record of the JSON Schema: {_reason(exc)}")
                return
            half = len(array) // 2
            self._read(array.slice(0, half), offset, pieces, invalid)
            self._read(array.slice(half), offset + half, pieces, invalid)

    def _read_all(self, array: pa.Array) -> pa.Table:
        joined = pc.binary_join_element_wise(array, _NEWLINE, b"")
        offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=len(joined) + 1, offset=4 * joined.offset)
        start, end = int(offsets[0]), int(offsets[-1])
        data = joined.buffers()[2].slice(start, end - start) if end > start else pa.py_buffer(b"")
        table = pj.read_json(
            pa.BufferReader(data),
            parse_options=self._parse,
            read_options=pj.ReadOptions(block_size=max(1 << 20, end - start + 1)),
        )
        if table.num_rows != len(array):
            raise _Miscount(
                "not one JSON object" if len(array) == 1 else f"{table.num_rows} objects in {len(array)} records"
            )
        return table

    def _to_batch(self, table: pa.Table, invalid: list[int]) -> pa.RecordBatch:
        columns = [
            table.column(target.name).combine_chunks().cast(target.type, safe=False) for target in self.fields_schema
        ]
        rowtime = None
        if self.rowtime_source is not None:
            rowtime = columns[self.fields_schema.get_field_index(self.rowtime_source)]
            if not isinstance(self._rowtime_kind, TimestampType):  # epoch seconds, as Dagger reads a number
                micros = pc.multiply(rowtime.cast(pa.float64()), 1_000_000.0)
                whole = micros if isinstance(self._rowtime_kind, LongType) else pc.round(micros)
                rowtime = whole.cast(pa.int64(), safe=False).cast(pa.timestamp("us", tz="UTC"))
        columns.extend(validity_and_rowtime(table.num_rows, invalid, rowtime))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)


_CHANGED = re.compile(r"Column\((/[^)]*)?\) changed from (\w+) to (\w+)")


def _reason(exc: BaseException) -> str:
    """Arrow's complaint about one record in the user's terms: ``Column(/a/b) changed from number to string`` (the
    schema said number) becomes ``a.b is a string where the schema says number``."""
    text = str(exc).replace("JSON parse error: ", "").split(" in row ")[0]
    changed = _CHANGED.search(text)
    if changed:
        path = (changed.group(1) or "").strip("/").replace("/", ".") or "the record"
        return f"{path} is a{'n' if changed.group(3)[0] in 'aeiou' else ''} {changed.group(3)} where the schema says {changed.group(2)}"
    return text
