"""CPU time and resident memory of a Spark job's processes (the JVM and its Python workers), read from /proc.

Used by the benchmarks to say how much of the machine the job itself used, apart from the broker and the
services it talks to that share the machine.
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
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


def cpu_seconds(root: int, skip: set[int] | frozenset[int] = frozenset()) -> float:
    """User + system CPU seconds of ``root``'s tree, including children that have exited and been reaped; ``skip``:
    processes of the tree left out (services it runs beside the work measured)."""
    total = 0
    for pid in tree(root):
        if pid in skip:
            continue
        fields = _stat(pid)
        if fields:
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICKS


#: kcmp(2)'s syscall number by machine, and its KCMP_VM: whether two tasks share one address space
_KCMP = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
_KCMP_VM = 1
_libc = ctypes.CDLL(None, use_errno=True)


def shares_memory(pid: int, other: int) -> bool:
    """Whether ``pid`` and ``other`` are tasks of one address space (kcmp(2)): threads of one process, or a child in
    the instant between its vfork-style start and its exec. The JVM starts each program it runs (Hadoop's ``chmod``
    of every checkpoint file: Spark's local file system has no native library) through ``posix_spawn``, whose child
    runs in the JVM's memory until it execs; its RSS then reads as the JVM's, and summing both counted it twice
    (1,773 MiB "RSS summed" at a PSS of 1,018 in one bench run). False where kcmp cannot tell (another machine, no
    permission, a task gone)."""
    if _KCMP is None:
        return False
    return _libc.syscall(_KCMP, pid, other, _KCMP_VM, 0, 0) == 0


def _own_memory(pids: list[int]) -> list[int]:
    """``pids`` less each task that runs in its parent's memory (:func:`shares_memory`)."""
    parents = {pid: fields[1] for pid in pids if (fields := _stat(pid))}
    return [pid for pid in pids if pid in parents and not shares_memory(pid, int(parents[pid]))]


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


def jvm_pid(spark: object) -> int:
    """The pid of the JVM PySpark launched for ``spark``."""
    return spark.sparkContext._gateway.proc.pid  # type: ignore[attr-defined]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_daemon(pid: int, cmd: str, parent_cmd: str) -> bool:
    """A Spark worker daemon: it leads its own process group (``pyspark.daemon.manager``), forked by the fork
    server or started as ``-m dagger.session.daemon``/``pyspark.daemon``."""
    try:
        leads = os.getpgid(pid) == pid
    except OSError:
        return False
    return leads and ("daemon" in cmd or "dagger.session.forkserver" in parent_cmd)


def memory_by_kind(root: int) -> dict[str, dict[str, int]]:
    """Memory of ``root``'s process tree (a ``dagger run`` or a Python driver) by kind of process: ``JVM``,
    ``Python driver``, ``fork server``, ``worker daemons``, ``Python workers``, ``source runners``,
    ``worker launchers`` (the small clients Spark starts for forked processes), ``other``. Each kind has
    ``processes``, ``rss`` and ``pss`` in bytes; PSS divides pages shared by forked processes among them, so
    its sum is what the tree holds, while the RSS sum counts a shared page once per process."""
    pids = _own_memory(tree(root))
    stats = {pid: _stat(pid) for pid in pids}
    parent_of = {pid: int(fields[1]) for pid, fields in stats.items() if fields}
    cmd = {pid: _cmdline(pid) for pid in pids}
    daemons = {p for p in pids if p != root and _is_daemon(p, cmd[p], cmd.get(parent_of.get(p, -1), ""))}
    out: dict[str, dict[str, int]] = {}
    for pid in pids:
        if not cmd[pid]:
            continue
        parent = parent_of.get(pid, -1)
        if Path(cmd[pid].split(" ", 1)[0]).name == "java":
            kind = "JVM"
        elif pid == root:
            kind = "Python driver"
        elif "forkserver.py --client" in cmd[pid]:
            kind = "worker launchers"
        elif parent == root and "dagger.session.forkserver" in cmd[pid]:
            kind = "fork server"
        elif pid in daemons:
            kind = "worker daemons"
        elif parent in daemons:
            kind = "Python workers"
        elif "dagger.session.forkserver" in cmd.get(parent, ""):
            kind = "source runners"
        else:
            kind = "other"
        entry = out.setdefault(kind, {"processes": 0, "rss": 0, "pss": 0})
        entry["processes"] += 1
        entry["rss"] += rss_of(pid)
        entry["pss"] += pss_of(pid)
    return out


class PeakMemory:
    """The peak memory of a process tree over repeated :meth:`sample` calls: the RSS sum, the PSS sum (what the
    tree holds: pages its forked processes share count once), and the PSS peak's :func:`memory_by_kind`.

    The RSS sum is read at every call; the PSS, which the kernel works out by walking every mapping of every
    process (``smaps_rollup``: a quarter of a core at two reads a second of a running job's tree on 2 cores,
    taken from the job being measured), at most every ``pss_interval`` seconds."""

    def __init__(self, root: int, pss_interval: float = 5.0):
        self.root, self.rss, self.pss = root, 0, 0
        self.pss_interval = pss_interval
        self.kinds: dict[str, dict[str, int]] = {}
        self._pss_read = -1e9  # when the PSS was last read (monotonic)

    def sample(self) -> None:
        now = time.monotonic()
        if now - self._pss_read < self.pss_interval:
            self.rss = max(self.rss, sum(rss_of(pid) for pid in _own_memory(tree(self.root))))
            return
        self._pss_read = now
        kinds = memory_by_kind(self.root)
        self.rss = max(self.rss, sum(k["rss"] for k in kinds.values()))
        pss = sum(k["pss"] for k in kinds.values())
        if pss > self.pss:
            self.pss, self.kinds = pss, kinds

    def by_kind_mib(self) -> dict[str, dict[str, int]]:
        """The PSS peak's breakdown in MiB, the largest holder first."""
        return {
            kind: {"processes": k["processes"], "rss_mib": round(k["rss"] / 2**20), "pss_mib": round(k["pss"] / 2**20)}
            for kind, k in sorted(self.kinds.items(), key=lambda item: -item[1]["pss"])
        }


class CpuSampler:
    """User + system CPU seconds of the trees of ``roots`` while they run: a thread reads every process of the
    trees each ``interval`` and keeps each one's latest own total, so a process that is never waited for (a JVM a
    PyFlink process starts) counts too; one that ends between two readings loses at most ``interval`` of its
    CPU, and one that starts and ends between them is missed."""

    def __init__(self, roots: list[int], interval: float = 0.2):
        import threading

        self.roots, self.interval = roots, interval
        self._latest: dict[int, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self._latest.values()) / _TICKS

    def _run(self) -> None:
        while True:
            self._sample()
            if self._done.wait(self.interval):
                return

    def _sample(self) -> None:
        for root in self.roots:
            for pid in tree(root):
                fields = _stat(pid)
                if fields:  # its own utime + stime: a child's are counted from its own readings, not twice
                    self._latest[pid] = max(self._latest.get(pid, 0), int(fields[11]) + int(fields[12]))
