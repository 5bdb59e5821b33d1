"""What a column reference in a query points at: its table among those a ``SELECT`` reads, and its Spark type from
the input tables' schemas (for rewrites that depend on a column's type: ``UNNEST``, Timestamp fields)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp


def sources(select: exp.Select) -> dict[str, str]:
    """Alias (or name), lower-cased → table name, for the plain tables the select reads."""
    out = {}
    from_ = select.args.get("from_") or select.args.get("from")
    tables = [from_.this] if from_ is not None else []
    tables += [j.this for j in select.args.get("joins") or []]
    for table in tables:
        if isinstance(table, exp.Table):
            out[(table.alias_or_name).lower()] = table.name
    return out


def column_type(select: exp.Select, parts: list[str], schemas: dict[str, Any]) -> Any:
    """The Spark type of the column (or nested field) ``parts`` names in one of ``select``'s tables (the first that
    has it, as the query would resolve it), or None: an unknown name, a computed column, a subquery's column."""
    from pyspark.sql.types import StructType

    tables = sources(select)
    if len(parts) > 1 and parts[0].lower() in tables:
        candidates = [(tables[parts[0].lower()], parts[1:])]
    else:
        candidates = [(table, parts) for table in tables.values()]
    for table, path in candidates:
        data_type = schemas.get(table)
        for part in path:
            if not isinstance(data_type, StructType):
                data_type = None
                break
            data_type = next((f.dataType for f in data_type.fields if f.name.lower() == part.lower()), None)
        if data_type is not None:
            return data_type
    return None
