"""CPU time and resident memory of a Spark job's processes (the JVM and its Python workers), read from /proc.

Used by the benchmarks to say how much of the machine the job itself used, apart from the broker and the
services it talks to that share the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from "state" on (field 3 of proc(5))


def tree(root: int) -> list[int]:
    """``root`` and all its descendants, each parent before its children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root``'s tree, including children that have exited and been reaped."""
    total = 0
    for pid in tree(root):
        fields = _stat(pid)
        if fields:
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICKS


def rss_of(pid: int) -> int:
    """Resident memory of the one process ``pid`` right now (0 once it has exited)."""
    fields = _stat(pid)
    return int(fields[21]) * _PAGE if fields else 0  # rss, in pages


def pss_of(pid: int) -> int:
    """Proportional set size of ``pid`` (its private pages plus its share of pages shared with other processes,
    such as a forked worker's copy-on-write pages): these add up to the memory a tree really holds."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def rss_bytes(root: int) -> int:
    """Resident memory of ``root``'s tree right now."""
    return sum(rss_of(pid) for pid in tree(root))


def jvm_pid(spark: object) -> int:
    """The pid of the JVM PySpark launched for ``spark``."""
    return spark.sparkContext._gateway.proc.pid  # type: ignore[attr-defined]
