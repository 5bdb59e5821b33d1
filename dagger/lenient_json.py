"""JSON read as leniently as Dagger's Gson (configs) and json-smart (lookup answers) read it: unquoted keys and
values (``{"host":localhost}``, ``{data: 23.33}``), single quotes, trailing commas.

Strict JSON is tried first (``json`` for text, orjson for bytes); only an object or array that strict JSON refuses
is read again with chompjs. The caller learns whether the lenient read was needed, to warn about it once.
"""

from __future__ import annotations

import json
from typing import Any

import chompjs
import orjson


def loads(data: str | bytes) -> tuple[Any, json.JSONDecodeError | None]:
    """``(value, None)`` for strict JSON, ``(value, the strict error)`` when only the lenient read works; raises the
    strict error (with its position) when neither reads ``data``."""
    try:
        return (orjson.loads(data) if isinstance(data, bytes) else json.loads(data)), None
    except json.JSONDecodeError as exc:  # orjson's error is a subclass
        strict = exc
    text = (data.decode("utf-8", "replace") if isinstance(data, bytes) else data).strip()
    if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):  # an object or array, whole: never a prefix
        try:
            return chompjs.parse_js_object(text), strict
        except ValueError:
            pass
    raise strict
