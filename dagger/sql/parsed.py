"""The query Spark runs, parsed once: the analyses that read it (which columns it reads, whether it depends on
the watermark, which state it keeps, how its GROUP BY splits) share one sqlglot tree instead of each parsing
the same text."""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError


@functools.lru_cache(maxsize=16)
def parsed(sql: str) -> exp.Expression | None:
    """``sql`` parsed in Spark's dialect, or ``None`` when it cannot be parsed. The tree is shared between callers:
    read it, or ``copy()`` it before changing it."""
    try:
        return sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError):
        return None
