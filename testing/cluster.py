"""A local Spark standalone cluster from the pyspark package: a master and workers as separate JVMs.

The pyspark wheel has no ``sbin/`` start scripts, so each daemon is started with ``spark-class``. ``make
cluster-up`` / ``make cluster-down`` run ``python -m testing.cluster up|down``; tests use
:class:`StandaloneCluster` directly.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from testing.broker import free_port
from testing.process import stop_process


def spark_home() -> str:
    """The pyspark package directory, which is a Spark distribution (``bin/spark-class``, ``jars/``)."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


class StandaloneCluster:
    """A master on ``127.0.0.1`` and ``workers`` workers with ``cores`` cores and ``memory`` each; their logs and
    work directories under ``root``."""

    def __init__(
        self,
        root: str | Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        port: int | None = None,
        ui_port: int | None = None,
    ):
        self.root = Path(root)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = port or free_port()
        self.ui_port = ui_port or free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _daemon(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the daemon keeps it
        env = {**os.environ, "SPARK_HOME": spark_home()}
        return subprocess.Popen(
            [os.path.join(spark_home(), "bin", "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.processes.append(
            self._daemon(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            )
        )
        for i in range(self.workers):
            work = self.root / f"worker-{i}"
            self.processes.append(
                self._daemon(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(work),
                    self.url,
                )
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                self.stop()
                raise RuntimeError(f"a Spark daemon exited at start; see the logs in {self.root}")
            if self.alive_workers() == self.workers:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.workers} workers did not register with {self.url} within {timeout:.0f} s")

    def alive_workers(self) -> int:
        """Workers the master counts as alive (from its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                state = json.loads(response.read())
        except (OSError, ValueError):  # not up yet; while its UI starts the master answered /json/ with its HTML page
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def task_counts(self) -> list[int]:
        """Tasks each worker's executors ran (their ``Running task`` log lines), worker by worker."""
        counts = []
        for i in range(self.workers):
            logs = (self.root / f"worker-{i}").glob("app-*/*/stderr")
            counts.append(sum(p.read_text(errors="replace").count("Running task") for p in logs))
        return counts

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs (``CoarseGrainedExecutorBackend``) the workers run right now."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmdline and cwd.startswith(str(self.root)):
                pids.append(int(entry.name))
        return sorted(pids)

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop_process(process)
        self.processes = []

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testing.cluster",
        description="Start (up) or stop (down) a local Spark standalone cluster: a master and workers as JVMs.",
    )
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--root", default=".cluster", help="logs, work directories and the pid file")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="2g", help="memory per worker")
    parser.add_argument("--port", type=int, default=7077, help="the master's port (spark://127.0.0.1:PORT)")
    parser.add_argument("--ui-port", type=int, default=8080, help="the master's web UI")
    args = parser.parse_args(argv)
    root = Path(args.root)
    pids = root / "pids.json"
    if args.action == "down":
        if not pids.exists():
            print("no cluster is running here", file=sys.stderr)
            return 0
        for pid in json.loads(pids.read_text())["pids"]:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        pids.unlink()
        print("cluster stopped")
        return 0
    cluster = StandaloneCluster(root, args.workers, args.cores, args.memory, args.port, args.ui_port).start()
    pids.write_text(json.dumps({"pids": [p.pid for p in cluster.processes], "master": cluster.url}))
    print(f"master {cluster.url} (web UI http://127.0.0.1:{cluster.ui_port}) with {args.workers} workers")
    print(f"submit: see docs/deploy.md, 'spark-submit on a cluster'; stop with make cluster-down (logs in {root})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
