"""One readable line per problem of a pydantic validation error: key, value, and what is accepted."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

#: fields that hold a group of keys users write at the level above (the single sink's keys sit at the top level)
_FLATTENED = ("single_sink",)


_KEYED = re.compile(r"^[A-Z][A-Z0-9_]*(\[\d+\])?(\.[A-Za-z0-9_\[\]]+)*: ")


def format_validation_error(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """The problems of ``exc`` (raised validating ``root``), one line each, each once."""
    lines = [_format_error(err, root) for err in exc.errors(include_url=False)]
    # pydantic reports the same union failure once per branch; keep each message once
    return list(dict.fromkeys(lines))


def _location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _FLATTENED:
            continue
        elif part in ("function-after", "function-before", "json-or-python", "list", "dict") or str(part).startswith(
            ("function-", "nullable")
        ):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _known_keys(model: type[BaseModel]) -> list[str]:
    keys = list(model.model_fields)
    if model.__name__ == "JobConfig":
        keys.append("SQL_QUERY")
    return keys


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel]:
    """The model class that owns the last key of ``loc`` (for unknown-key suggestions)."""
    model = root
    for part in loc[:-1]:
        if isinstance(part, int) or part not in model.model_fields:
            continue
        annotation = model.model_fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        for cand in list(candidates):
            candidates.extend(getattr(cand, "__args__", ()))
        for cand in candidates:
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                model = cand
                break
    return model


def _format_error(err: dict[str, Any], root: type[BaseModel]) -> str:
    loc = tuple(err.get("loc", ()))
    where = _location(loc)
    kind = err.get("type", "")
    value = err.get("input")
    if kind == "extra_forbidden":
        key = str(loc[-1])
        known = _known_keys(_model_at(root, loc))
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"{where}: unknown key{hint}"
    if kind == "missing":
        return f"{where}: is required"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{where}: {value!r} is not accepted; accepted: {expected}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{where}: {value!r} is not an integer"
    if kind in ("bool_parsing", "bool_type"):
        return f"{where}: {value!r} is not a boolean; accepted: true, false"
    if kind in ("string_type",):
        return f"{where}: expected a string, got {json.dumps(value)[:80]}"
    if kind in ("list_type",):
        return f"{where}: expected a JSON array, got {json.dumps(value)[:80]}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"{where}: expected a JSON object, got {json.dumps(value, default=str)[:80]}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{where}: {value!r} {err['msg'].lower()}"
    if kind == "value_error":
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        if message.startswith("is not valid JSON"):
            return f"{where}: {message}"
        # a model validator may report several problems, one per line (a sink entry's keys); a problem that
        # starts with the key it is about (``KEY: ...``) hangs that key on the entry's path
        return "\n  - ".join(
            m if not where else f"{where}.{m}" if _KEYED.match(m) else f"{where}: {m}" for m in message.split("\n  - ")
        )
    return f"{where}: {err.get('msg')} (got {json.dumps(value, default=str)[:80]})"


def placed(where: str, problems: list[str]) -> list[str]:
    """``problems`` of the entry at ``where`` (``STREAMS[0]``; empty: the top level), as :func:`format_validation_error`
    words them: a problem that starts with the key it is about hangs that key on the entry's path."""
    return [m if not where else f"{where}.{m}" if _KEYED.match(m) else f"{where}: {m}" for m in problems]
