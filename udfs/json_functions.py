"""JSONPath functions over JSON strings (``jsonpath-ng``, extended syntax with filters).

Vectorized over Arrow batches; each JSON document is parsed once per call. Results are compact JSON strings
as Dagger's Jackson serialisation writes them (``{"a":1}``).
"""

from __future__ import annotations

import json
from functools import lru_cache

import pyarrow as pa

from udfs.declare import Example, arrow_function, macro, macro_args, rows

_INDEFINITE = ("*", "..", "?(", ":", ",")


@lru_cache(maxsize=256)
def _path(function: str, text: str):  # noqa: ANN202
    from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
    from jsonpath_ng.ext import parse

    try:
        return parse(text)
    except (JsonPathLexerError, JsonPathParserError, Exception) as exc:  # noqa: BLE001 - the parser raises several
        raise ValueError(f"{function}: {text!r} is not a valid JSONPath ({exc})") from None


def _document(function: str, text: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{function}: input is not valid JSON ({exc}): {text[:200]!r}") from None


def _dump(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@arrow_function(
    "JsonQuery",
    "json STRING, path STRING",
    "STRING",
    examples=[
        Example("""SELECT JsonQuery('{"a":{"b":[1,2]}}', '$.a')""", [('{"b":[1,2]}',)]),
        Example("""SELECT JsonQuery('{"a":{"b":[1,2]}}', '$.a.b[*]')""", [("[1,2]",)]),
        Example("""SELECT JsonQuery('{"a":1}', '$.missing')""", [(None,)]),
    ],
    notes="A missing path gives NULL; Dagger (Jayway, DEFAULT_PATH_LEAF_TO_NULL) gives NULL for a missing leaf but "
    "fails the job when an intermediate node is missing.",
)
def json_query(json_text: pa.Array, path: pa.Array) -> pa.Array:
    """The JSON (compact string) at ``path``: one value for a definite path, a JSON array for ``*``/``..``/filters."""
    out = []
    for doc, expr in rows(json_text, path):
        if doc is None or expr is None:
            out.append(None)
            continue
        matches = [m.value for m in _path("JsonQuery", expr).find(_document("JsonQuery", doc))]
        if any(token in expr for token in _INDEFINITE):
            out.append(_dump(matches))
        else:
            out.append(None if not matches or matches[0] is None else _dump(matches[0]))
    return pa.array(out, pa.string())


@arrow_function(
    "JsonDelete",
    "json STRING, path STRING",
    "STRING",
    examples=[
        Example("""SELECT JsonDelete('{"a":{"b":[1,2]},"c":3}', '$.a.b[0]')""", [('{"a":{"b":[2]},"c":3}',)]),
        Example("""SELECT JsonDelete('{"a":1,"c":3}', '$.c')""", [('{"a":1}',)]),
    ],
)
def json_delete(json_text: pa.Array, path: pa.Array) -> pa.Array:
    """The document without the nodes (or array elements) at ``path``; unchanged when nothing matches."""
    out = []
    for doc, expr in rows(json_text, path):
        if doc is None or expr is None:
            out.append(None)
            continue
        out.append(_dump(_path("JsonDelete", expr).filter(lambda _: True, _document("JsonDelete", doc))))
    return pa.array(out, pa.string())


@arrow_function("__JsonUpdate", "json STRING, path STRING, value_json STRING", "STRING")
def json_update_json(json_text: pa.Array, path: pa.Array, value_json: pa.Array) -> pa.Array:
    """JsonUpdate's worker: the new value arrives as ``{"v": value}`` so that any SQL type keeps its JSON form."""
    out = []
    for doc, expr, value in rows(json_text, path, value_json):
        if doc is None or expr is None:
            out.append(None)
            continue
        new = None if value is None else json.loads(value).get("v")
        out.append(_dump(_path("JsonUpdate", expr).update_or_create(_document("JsonUpdate", doc), new)))
    return pa.array(out, pa.string())


@macro(
    "JsonUpdate",
    "JsonUpdate(json STRING, path STRING, value ANY) -> STRING",
    python=True,
    examples=[
        Example("""SELECT JsonUpdate('{"a":{"b":1}}', '$.a.b', 2)""", [('{"a":{"b":2}}',)]),
        Example("""SELECT JsonUpdate('{"a":{"b":1}}', '$.a.c', 'x')""", [('{"a":{"b":1,"c":"x"}}',)]),
        Example("""SELECT JsonUpdate('{"a":1}', '$.a', array(1, 2))""", [('{"a":[1,2]}',)]),
    ],
)
def json_update(args: list) -> str:
    """The document with ``value`` (any SQL type, written as JSON) set at ``path``; a missing leaf is added."""
    doc, path, value = macro_args("JsonUpdate", args, 3)
    return f"__JsonUpdate({doc}, {path}, to_json(named_struct('v', {value})))"
