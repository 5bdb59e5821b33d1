"""Start ``bqemulator`` (BigQuery REST + Storage Write/Read gRPC) on free loopback ports.

The emulator lives in its own virtualenv (``.venv-bqemu``, made by ``make test-servers``) because it pins
``grpcio-tools`` and ``sqlglot`` versions the job runtime does not want. It needs DuckDB's ``spatial``
extension at start and would download it, so the extension files shipped on PyPI are copied into the
server's own ``$HOME/.duckdb`` first. Stock 1.4.0 drops RECORD sub-fields in the Storage Write path; the
launcher patches that one function (reference/infra.md §1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from testing.broker import free_port
from testing.process import stop_process

ROOT = Path(__file__).resolve().parents[1]
EMULATOR_VENV = Path(os.environ.get("DAGGER_BQEMU_VENV", ROOT / ".venv-bqemu"))
INSTALL_HINT = "run `make test-servers` (it builds .venv-bqemu with bqemulator==1.4.0 and duckdb==1.5.5)"

_LAUNCHER = """
import sys
from bqemulator.grpc_api import write_servicer
from bqemulator.api.routes.tabledata import _build_arrow_schema, _fields_raw_from_schema
write_servicer._table_arrow_schema = lambda tm: _build_arrow_schema(_fields_raw_from_schema(tm.schema_.fields))
from bqemulator.cli import main
sys.exit(main())
"""


class BigQueryEmulator:
    """A ``bqemulator`` process; ``rest_endpoint`` / ``grpc_endpoint`` / ``project`` for clients."""

    def __init__(self, project: str = "test-proj", max_request_bytes: int | None = None):
        self.project = project
        self.rest_port = free_port()
        self.grpc_port = free_port()
        self.rest_endpoint = f"http://127.0.0.1:{self.rest_port}"
        self.grpc_endpoint = f"127.0.0.1:{self.grpc_port}"
        self.max_request_bytes = max_request_bytes
        self.dir = Path(tempfile.mkdtemp(prefix="dagger-bqemu-"))
        self.process: subprocess.Popen | None = None

    def _python(self) -> Path:
        python = EMULATOR_VENV / "bin" / "python"
        if not python.exists():
            raise RuntimeError(f"the BigQuery emulator is not installed ({python} is missing): {INSTALL_HINT}")
        return python

    def _install_extensions(self, python: Path) -> None:
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        target = self.dir / "home" / ".duckdb" / "extensions" / "v1.5.5" / "linux_amd64"
        target.mkdir(parents=True, exist_ok=True)
        for name in ("spatial", "avro"):
            source = Path(site) / f"duckdb_extension_{name}" / "extensions" / "v1.5.5" / f"{name}.duckdb_extension"
            if source.exists():
                shutil.copy(source, target)
        if not (target / "spatial.duckdb_extension").exists():
            raise RuntimeError(f"duckdb-extension-spatial 1.5.5 is missing from {EMULATOR_VENV}: {INSTALL_HINT}")

    def start(self, timeout: float = 60.0) -> BigQueryEmulator:
        import requests

        python = self._python()
        self._install_extensions(python)
        launcher = self.dir / "launch_bqemu.py"
        launcher.write_text(_LAUNCHER)
        env = dict(os.environ, HOME=str(self.dir / "home"))
        if self.max_request_bytes:
            env["BQEMU_WRITE_API_MAX_REQUEST_BYTES"] = str(self.max_request_bytes)
        log = open(self.dir / "bqemulator.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [
                str(python),
                str(launcher),
                "start",
                "--rest-host",
                "127.0.0.1",
                "--rest-port",
                str(self.rest_port),
                "--grpc-host",
                "127.0.0.1",
                "--grpc-port",
                str(self.grpc_port),
                "--project",
                self.project,
                "--log-format",
                "json",
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"{self.rest_endpoint}/bigquery/v2/projects/{self.project}/datasets"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = (self.dir / "bqemulator.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"bqemulator exited with code {self.process.returncode}:\n{tail}")
            try:
                requests.get(url, timeout=1)
                return self
            except requests.ConnectionError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"bqemulator did not answer within {timeout:.0f} s; see {self.dir}/bqemulator.log")

    def client(self):  # noqa: ANN201 - google.cloud.bigquery.Client
        """A REST client with anonymous credentials pointed at the emulator."""
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import bigquery

        return bigquery.Client(
            project=self.project,
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=self.rest_endpoint),
        )

    def stop(self) -> None:
        stop_process(self.process, 15)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> BigQueryEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
