"""Untyped lookup outputs (Spark VARIANT columns) as sinks receive them: each column in its values' own type."""

from __future__ import annotations

import json

import pyarrow as pa
from pyspark.sql.types import VariantVal

from dagger.formats.json.writing import json_lines
from dagger.influx.line_protocol import line_protocol
from dagger.serde.variant import is_json_text, is_variant, typed_variants, without_variants

VARIANT = pa.struct(
    [pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False, {b"variant": b"true"})]
)


def variants(*texts: str | None) -> pa.Array:
    """A VARIANT column in Spark's Arrow form, from JSON texts (None: a null row)."""
    parsed = [None if t is None else VariantVal.parseJson(t) for t in texts]
    return pa.array([None if v is None else {"value": v.value, "metadata": v.metadata} for v in parsed], VARIANT)


def test_each_variant_column_takes_the_type_its_values_share():
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["a", "b", "c"]),
            variants("23.33", "7", None),
            variants("7", "8", "null"),
            variants('"x"', None, '"z"'),
            variants("true", "false", None),
            variants('{"a": 1}', "[1, 2]", '"mixed"'),
        ],
        names=["id", "number", "int", "text", "flag", "other"],
    )
    assert [is_variant(f) for f in batch.schema] == [False, True, True, True, True, True]
    assert without_variants(batch.schema).names == ["id"]
    typed = typed_variants(batch)
    assert [str(t) for t in typed.schema.types] == ["string", "double", "int64", "string", "bool", "string"]
    assert typed.column(1).to_pylist() == [23.33, 7.0, None]  # a JSON number: a DOUBLE, as Dagger keeps it
    assert typed.column(2).to_pylist() == [7, 8, None]
    assert typed.column(3).to_pylist() == ["x", None, "z"]
    assert [is_json_text(f) for f in typed.schema] == [False] * 5 + [True]
    # the JSON sink writes numbers as numbers and objects as objects, not as quoted text
    rows = [json.loads(line) for line in json_lines(typed)]
    assert rows[0] == {"id": "a", "number": 23.33, "int": 7, "text": "x", "flag": True, "other": {"a": 1}}
    assert rows[1]["other"] == [1, 2] and rows[2]["other"] == "mixed"
    # InfluxDB gets a float field, not a string one
    lines, _ = line_protocol(typed.select(["number", "text"]), "m")
    assert lines.to_pylist()[0].startswith('m number=23.33,text="x"')


def test_a_batch_without_variants_is_passed_as_is():
    batch = pa.RecordBatch.from_arrays([pa.array([1])], names=["n"])
    assert typed_variants(batch) is batch
