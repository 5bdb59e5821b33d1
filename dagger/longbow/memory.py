"""Longbow's history kept in a file instead of Bigtable, for ``dagger test`` (runs on the executors, in the Longbow
tasks, and on the driver to seed a case's ``LONGBOW_HISTORY``).

:class:`MemoryStore` has :class:`~dagger.longbow.bigtable.BigtableStore`'s calls (``write``, ``scan``,
``take_timings``, ``close``) over one SQLite file (the standard library's): the tasks of different micro-batches
run in different Python workers, so the history must outlive a process, as Bigtable's does. Like Longbow's table
(one version per cell), a cell written again replaces the one before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence


class MemoryStore:
    """One Longbow table's rows in the SQLite file ``path`` (tables share the file, by name)."""

    def __init__(self, path: str, table: str):
        self.table = table
        self.connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS cells (tbl TEXT, key BLOB, qualifier TEXT, value BLOB, micros INTEGER, "
            "PRIMARY KEY (tbl, key, qualifier))"
        )
        self.timings: list[tuple[str, str, float]] = []

    def write(
        self, keys: Sequence[bytes], micros: Sequence[int], cells: dict[str, Sequence[str | bytes | None]]
    ) -> list[int]:
        """As :meth:`BigtableStore.write`: every row written; no row fails."""
        rows = [
            (self.table, key, qualifier, value if isinstance(value, bytes) else value.encode(), micros[i])
            for i, key in enumerate(keys)
            for qualifier, values in cells.items()
            if (value := values[i]) is not None
        ]
        self.connection.executemany("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?, ?)", rows)
        self.timings.append(("writer", "success", 0.0))
        return []

    def scan(self, ranges: Sequence[tuple[bytes, bytes]], qualifiers: Iterable[str]) -> dict[bytes, dict[bytes, bytes]]:
        """As :meth:`BigtableStore.scan`: the rows within the inclusive ``ranges``, for ``qualifiers``."""
        wanted = list(qualifiers)
        marks = ",".join("?" * len(wanted))
        rows: dict[bytes, dict[bytes, bytes]] = {}
        for start, end in ranges:
            found = self.connection.execute(
                f"SELECT key, qualifier, value FROM cells WHERE tbl = ? AND key BETWEEN ? AND ? "  # noqa: S608
                f"AND qualifier IN ({marks})",
                (self.table, start, end, *wanted),
            )
            for key, qualifier, value in found:
                rows.setdefault(bytes(key), {})[qualifier.encode()] = bytes(value)
        self.timings.append(("reader", "success", 0.0))
        return rows

    def take_timings(self) -> list[tuple[str, str, float]]:
        taken, self.timings = self.timings, []
        return taken

    def close(self) -> None:
        self.connection.close()
