"""A throwaway InfluxDB 1.x server (Debian's ``influxd``) on free loopback ports, and a v2 write shim.

``InfluxServer`` runs ``influxd`` with its data in a temporary directory (config by environment, no file).
``V2WriteShim`` is a small HTTP server that implements InfluxDB 2.x's ``POST /api/v2/write`` (bucket
``db/rp``, token header, precision) by forwarding to a 1.x ``/write``; it lets ``influxdb-client`` write
through the real 1.x storage engine, since no 2.x/3.x server can be installed here.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from testing.broker import free_port
from testing.process import stop_process

INSTALL_HINT = "apt-get install -y --no-install-recommends influxdb (make test-servers does it)"


class InfluxServer:
    """``influxd`` 1.x on a free port; :meth:`query` reads points back through ``/query``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="dagger-influx-"))
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> InfluxServer:
        import os

        import requests

        binary = shutil.which("influxd")
        if binary is None:
            raise RuntimeError(f"influxd is not installed: {INSTALL_HINT}")
        env = dict(
            os.environ,
            INFLUXDB_REPORTING_DISABLED="true",
            INFLUXDB_BIND_ADDRESS=f"127.0.0.1:{free_port()}",
            INFLUXDB_HTTP_BIND_ADDRESS=f"127.0.0.1:{self.port}",
            INFLUXDB_META_DIR=str(self.dir / "meta"),
            INFLUXDB_DATA_DIR=str(self.dir / "data"),
            INFLUXDB_DATA_WAL_DIR=str(self.dir / "wal"),
            INFLUXDB_HTTP_LOG_ENABLED="false",
            INFLUXDB_DATA_QUERY_LOG_ENABLED="false",
            INFLUXDB_MONITOR_STORE_ENABLED="false",
        )
        log = open(self.dir / "influxd.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [binary, "run", "-config", "/dev/null"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"influxd exited with code {self.process.returncode}; see {self.dir}/influxd.log")
            try:
                if requests.get(self.url + "/ping", timeout=1).status_code == 204:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"influxd did not answer /ping within {timeout:.0f} s")

    def query(self, q: str, db: str | None = None) -> dict[str, Any]:
        """Run InfluxQL; returns the JSON answer (epoch-ms times)."""
        import requests

        params = {"q": q, "epoch": "ms"}
        if db:
            params["db"] = db
        response = requests.post(self.url + "/query", params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def points(self, db: str, measurement: str) -> list[dict[str, Any]]:
        """Every point of ``measurement`` as a dict of column → value (tags and fields; ``time`` in ms)."""
        answer = self.query(f'SELECT * FROM "{measurement}"', db)
        series = answer["results"][0].get("series") or []
        return [dict(zip(s["columns"], row, strict=True)) for s in series for row in s["values"]]

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> InfluxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class V2WriteShim:
    """``POST /api/v2/write?bucket=db/rp&precision=ms`` → a 1.x ``/write``; records the tokens it saw."""

    _PRECISION = {"ns": "n", "us": "u", "ms": "ms", "s": "s"}

    def __init__(self, influx_url: str):
        self.influx_url = influx_url
        self.tokens: list[str] = []
        shim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                import urllib.parse

                import requests

                url = urllib.parse.urlparse(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if url.path != "/api/v2/write":
                    self._answer(404, b'{"code":"not found","message":"path not found"}')
                    return
                shim.tokens.append(self.headers.get("Authorization", ""))
                query = urllib.parse.parse_qs(url.query)
                db, _, rp = query.get("bucket", [""])[0].partition("/")
                params = {"db": db, "precision": self._precision(query)}
                if rp:
                    params["rp"] = rp
                if self.headers.get("Content-Encoding") == "gzip":
                    import gzip

                    body = gzip.decompress(body)
                answer = requests.post(shim.influx_url + "/write", params=params, data=body, timeout=30)
                if answer.status_code == 204:
                    self._answer(204, b"")
                    return
                error = answer.json().get("error", answer.text) if answer.text else ""
                import json

                self._answer(answer.status_code, json.dumps({"code": "invalid", "message": error}).encode())

            def _precision(self, query: dict[str, list[str]]) -> str:
                return V2WriteShim._PRECISION.get(query.get("precision", ["ns"])[0], "n")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> V2WriteShim:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
