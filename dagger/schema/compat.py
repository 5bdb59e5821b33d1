"""Descriptor pinning: record the schema a query was started with, and refuse incompatible restarts.

The checkpoint directory gets ``dagger/schema.json``: the SHA-256 of the descriptor sets and, per input
table, every column with its Spark type; and ``dagger/descriptors.json``, the descriptor sets themselves, which a
restart uses when their server cannot be reached (Dagger cannot restart then). On restart, each column the query uses (every column when it
selects ``*``) must still exist with the same type; otherwise the job stops before reading anything, with a
message naming the table, the field and both types. Added fields and enum values are always fine.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from dagger.checkpoint import CheckpointStore
from dagger.errors import SchemaCompatibilityError

log = logging.getLogger(__name__)
RECORD = "dagger/schema.json"
COPY = "dagger/descriptors.json"


def snapshot(sha256: str, tables: dict[str, Any]) -> dict[str, Any]:
    """The record for ``tables`` (name → Spark StructType)."""
    return {
        "descriptor_sha256": sha256,
        "tables": {name: {f.name: f.dataType.simpleString() for f in schema.fields} for name, schema in tables.items()},
    }


def check_and_record(store: CheckpointStore, current: dict[str, Any], used: set[str] | None) -> None:
    """Compare ``current`` with the record under the checkpoint (local or remote), then write ``current``."""
    previous = store.read_json(RECORD)
    if previous is not None:
        problems = incompatibilities(previous, current, used)
        if problems:
            raise SchemaCompatibilityError(
                "the descriptors changed incompatibly since this checkpoint was written "
                f"(sha256 {previous['descriptor_sha256'][:12]} -> {current['descriptor_sha256'][:12]}):\n  - "
                + "\n  - ".join(problems)
                + f"\nRestore the field, or start with a new checkpoint directory (not {store.location})."
            )
        if previous["descriptor_sha256"] != current["descriptor_sha256"]:
            log.info("descriptor sets changed compatibly since the checkpoint was written")
    store.write_json(RECORD, current)


def keep_copy(store: CheckpointStore, sha256: str, blobs: list[tuple[str, bytes]]) -> None:
    """Keep the descriptor sets themselves under the checkpoint (once per digest), so that a restart can go on
    while their server is down."""
    kept = store.read_json(COPY)
    if kept is not None and kept.get("sha256") == sha256:
        return
    sets = [{"source": source, "base64": base64.b64encode(data).decode()} for source, data in blobs]
    store.write_json(COPY, {"sha256": sha256, "sets": sets})


def kept_copy(store: CheckpointStore) -> tuple[str, list[tuple[str, bytes]]] | None:
    """The digest and ``(source, bytes)`` pairs of the descriptor sets the checkpoint keeps, or None."""
    kept = store.read_json(COPY)
    if kept is None:
        return None
    return kept["sha256"], [(s["source"], base64.b64decode(s["base64"])) for s in kept["sets"]]


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
