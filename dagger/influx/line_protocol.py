"""Arrow record batches as InfluxDB line protocol, built column-wise in Arrow (Dagger's point model: tags,
fields and the point's time chosen by column names; no Python string per row). Runs on the executors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from dagger.dead_letter import row_json

if TYPE_CHECKING:
    pass


TIME_COLUMN = "window_timestamp"


def _escape(array: pa.Array, specials: str) -> pa.Array:
    out = array
    for char in specials:
        out = pc.replace_substring(out, char, "\\" + char)
    return pc.replace_substring(out, "\n", "\\n")


def _escape_key(name: str) -> str:
    for char in "\\, =":
        name = name.replace(char, "\\" + char)
    return name


def _as_text(array: pa.Array) -> pa.Array:
    """Any column as a string array (nested values as JSON)."""
    t = array.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return array.cast(pa.string())
    if pa.types.is_timestamp(t):
        if t.tz is None:
            array = array.cast(pa.timestamp(t.unit, "UTC"))
        return pc.strftime(array, format="%Y-%m-%dT%H:%M:%SZ")
    if pa.types.is_date(t) or pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_floating(t):
        return array.cast(pa.string())
    if pa.types.is_decimal(t):
        return array.cast(pa.float64()).cast(pa.string())

    # binary, nested and other types: rare in metrics, converted value by value
    return pa.array([None if v is None else row_json(v).strip('"') for v in array.to_pylist()], pa.string())


def _field_values(array: pa.Array) -> pa.Array:
    """Line-protocol field values of one column (null where the field is left out)."""
    t = array.type
    if pa.types.is_integer(t):
        if pa.types.is_unsigned_integer(t) and t.bit_width == 64:
            return _field_values(array.cast(pa.float64()))
        return pc.binary_join_element_wise(array.cast(pa.string()), "i", "")
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        floats = array.cast(pa.float64())
        finite = pc.is_finite(floats)
        return pc.if_else(finite, floats.cast(pa.string()), pa.scalar(None, pa.string()))
    if pa.types.is_boolean(t):
        return array.cast(pa.string())
    text = _escape(_as_text(array), '\\"')
    return pc.binary_join_element_wise('"', text, '"', "")


def _join_pieces(pieces: list[pa.Array], n: int) -> pa.Array:
    """Comma-join the non-null pieces of each row ('' where all are null).

    (Folded pairwise: pyarrow 26's ``binary_join_element_wise(..., null_handling="skip")`` drops rows
    whose pieces are all null.)
    """
    if not pieces:
        return pa.array([""] * n, pa.string())
    joined = pieces[0]
    for piece in pieces[1:]:
        both = pc.binary_join_element_wise(joined, piece, ",")
        joined = pc.if_else(pc.is_null(joined), piece, pc.if_else(pc.is_null(piece), joined, both))
    return pc.fill_null(joined, "")


def line_protocol(batch: pa.RecordBatch, measurement: str) -> tuple[pa.Array, pa.Array]:
    """The line of each row, and a boolean mask of rows that have at least one field.

    Lines of rows without a field are not valid line protocol; callers must drop them.
    """
    n = batch.num_rows
    tags: list[pa.Array] = []
    fields: list[pa.Array] = []
    time_ms = None
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if not name:
            continue
        if name == TIME_COLUMN and pa.types.is_timestamp(column.type):
            time_ms = pc.divide(column.cast(pa.timestamp("us", "UTC")).cast(pa.int64()), 1000)
            continue
        if name.startswith(("tag_", "label_")):
            key = name.removeprefix("label_") if name.startswith("label_") else name
            values = _escape(_as_text(column), "\\, =")
            values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
            tags.append(pc.binary_join_element_wise(_escape_key(key) + "=", values, ""))
            continue
        values = _field_values(column)
        fields.append(pc.binary_join_element_wise(_escape_key(name) + "=", values, ""))
    head = pa.array([_escape_key(measurement).replace("\\=", "=")] * n, pa.string()) if n else pa.array([], pa.string())
    tag_text = _join_pieces(tags, n)
    head = pc.if_else(pc.equal(tag_text, ""), head, pc.binary_join_element_wise(head, tag_text, ","))
    field_text = _join_pieces(fields, n)
    has_field = pc.fill_null(pc.not_equal(field_text, ""), False)
    line = pc.binary_join_element_wise(head, field_text, " ")
    if time_ms is not None:
        with_time = pc.binary_join_element_wise(line, time_ms.cast(pa.string()), " ")
        line = pc.if_else(pc.is_valid(time_ms), with_time, line)
    return line, has_field


def join_lines(lines: pa.Array) -> str:
    """Newline-join a string array in Arrow (no Python string per line)."""
    wrapped = pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()), lines)
    return pc.binary_join(wrapped, "\n")[0].as_py()
