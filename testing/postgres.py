"""A throwaway PostgreSQL 15 cluster on a free loopback port (reference: infra.md §3).

``initdb`` with trust auth in a temporary directory, ``pg_ctl start`` with durability off; the server runs as
the ``postgres`` user when started by root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from testing.broker import free_port

PG_BIN = Path(os.environ.get("DAGGER_PG_BIN", "/usr/lib/postgresql/15/bin"))
INSTALL_HINT = "apt-get install -y postgresql (make test-servers does it)"


class PostgresServer:
    """``start()``, then ``dsn`` / ``host`` / ``port`` / ``user``; ``execute(sql)`` for setup; ``stop()``."""

    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self.user = "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="dagger-pg-"))
        self._as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/postgres"

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        command = list(args)
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    def start(self) -> PostgresServer:
        initdb = PG_BIN / "initdb"
        if not initdb.exists():
            raise RuntimeError(f"PostgreSQL 15 is not installed ({initdb} is missing): {INSTALL_HINT}")
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        data = self.dir / "data"
        done = self._run(str(initdb), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-500:]}")
        options = (
            f"-c listen_addresses={self.host} -p {self.port} -k {self.dir} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off"
        )
        done = self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.dir / "server.log"),
            "-w",
            "-t",
            "30",
            "-o",
            options,
            "start",
        )
        if done.returncode != 0:
            log = (self.dir / "server.log").read_text() if (self.dir / "server.log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()[-300:]} {log[-500:]}")
        return self

    def execute(self, sql: str) -> str:
        """Run SQL through psql; returns its output."""
        psql = str(PG_BIN / "psql") if (PG_BIN / "psql").exists() else "psql"
        done = self._run(
            psql,
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return done.stdout

    def stop(self) -> None:
        data = self.dir / "data"
        if (data / "postmaster.pid").exists():
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)
