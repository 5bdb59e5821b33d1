"""Generate ``docs/functions.md`` from the library's declarations (``dagger function-docs``).

Every example on the page is executed by ``tests/unit/udfs/test_udfs.py``, so the page shows what the code returns.
"""

from __future__ import annotations

from udfs import LIBRARY_MODULES, library

_KIND = {
    "sql": "Spark SQL function (inlined, no Python)",
    "macro": "rewritten into built-in Spark expressions (no Python)",
    "arrow": "vectorized Python over Arrow batches",
    "table": "Python table function (UDTF)",
}


def _value(value: object) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if value is None:
        return "NULL"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def render_functions() -> str:
    """The markdown reference of every public function, grouped by module."""
    functions = [f for f in library() if not f.hidden]
    lines = [
        "# Function reference",
        "",
        "Generated from the `udfs` package by `dagger function-docs` (`make docs`); do not edit by hand. Every",
        "Raystack Dagger UDF is available under its Dagger name (SQL names are case-insensitive). Every example",
        "below is executed by the test suite. Dagger's `LATERAL TABLE(f(...))` is accepted for table functions.",
        "",
        "| Function | Kind | Signature |",
        "|---|---|---|",
    ]
    for f in sorted(functions, key=lambda f: f.name.lower()):
        kind = "rewritten onto a vectorized Python worker" if f.uses_python else _KIND[f.kind]
        kind = f"aggregate, {kind}" if f.aggregate else kind
        lines.append(f"| [`{f.name}`](#{f.name.lower()}) | {kind} | `{f.signature}` |")
    lines.append("")
    for module in LIBRARY_MODULES:
        group = [f for f in functions if f.module == module]
        if not group:
            continue
        title = __import__(module, fromlist=["_"]).__doc__.strip().splitlines()[0]
        lines += [f"## {title}", ""]
        for f in group:
            lines += [f"### {f.name}", "", f"`{f.signature}`", "", f.doc, ""]
            if f.dagger_notes:
                lines += [f"*Compared with Dagger:* {f.dagger_notes}", ""]
            for example in f.examples:
                if example.setup:
                    lines += [f"With `t` = `{example.setup}`:", ""]
                result = "; ".join("(" + ", ".join(_value(v) for v in row) + ")" for row in example.result)
                lines += ["```sql", example.sql, "```", f"→ {result}", ""]
    return "\n".join(lines).rstrip() + "\n"
