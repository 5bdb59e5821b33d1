"""Descriptor pinning: record the schema a query was started with, and refuse incompatible restarts.

The checkpoint directory gets ``dagger/schema.json``: the SHA-256 of the descriptor sets and, per input
table, every column with its Spark type. On restart, each column the query uses (every column when it
selects ``*``) must still exist with the same type; otherwise the job stops before reading anything, with a
message naming the table, the field and both types. Added fields and enum values are always fine.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from dagger.errors import SchemaCompatibilityError

log = logging.getLogger(__name__)
RECORD = Path("dagger") / "schema.json"


def snapshot(sha256: str, tables: dict[str, Any]) -> dict[str, Any]:
    """The record for ``tables`` (name → Spark StructType)."""
    return {
        "descriptor_sha256": sha256,
        "tables": {name: {f.name: f.dataType.simpleString() for f in schema.fields} for name, schema in tables.items()},
    }


def _local(checkpoint: str) -> Path | None:
    if checkpoint.startswith("file:"):
        checkpoint = checkpoint[5:]
    if "://" in checkpoint:
        return None  # remote checkpoint stores are not checked (documented)
    return Path(checkpoint)


def check_and_record(checkpoint: str, current: dict[str, Any], used: set[str] | None) -> None:
    """Compare ``current`` with the record in ``checkpoint`` (if any), then write ``current``."""
    root = _local(checkpoint)
    if root is None:
        log.info("checkpoint %s is not local: descriptor compatibility is not checked", checkpoint)
        return
    path = root / RECORD
    if path.exists():
        previous = json.loads(path.read_text())
        problems = incompatibilities(previous, current, used)
        if problems:
            raise SchemaCompatibilityError(
                "the descriptors changed incompatibly since this checkpoint was written "
                f"(sha256 {previous['descriptor_sha256'][:12]} -> {current['descriptor_sha256'][:12]}):\n  - "
                + "\n  - ".join(problems)
                + f"\nRestore the field, or start with a new checkpoint directory (not {checkpoint})."
            )
        if previous["descriptor_sha256"] != current["descriptor_sha256"]:
            log.info("descriptor sets changed compatibly since the checkpoint was written")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2, sort_keys=True))


def incompatibilities(previous: dict[str, Any], current: dict[str, Any], used: set[str] | None) -> list[str]:
    """Human-readable problems: a used field removed or retyped."""
    problems = []
    for table, columns in previous["tables"].items():
        now = current["tables"].get(table)
        if now is None:
            continue
        for name, old_type in columns.items():
            if used is not None and name.lower() not in used:
                continue
            if name not in now:
                problems.append(f"table {table}: field '{name}' ({old_type}) was removed but the query uses it")
            elif now[name] != old_type:
                problems.append(f"table {table}: field '{name}' changed type from {old_type} to {now[name]}")
    return problems
