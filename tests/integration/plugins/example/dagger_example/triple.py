"""``Triple(x)``: three times ``x``, inlined into the SQL."""

from __future__ import annotations

from udfs.declare import sql_function


@sql_function("Triple", "x BIGINT", "BIGINT")
def triple() -> str:
    """Three times x."""
    return "x * 3"
