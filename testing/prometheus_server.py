"""A throwaway Prometheus server (Debian's ``prometheus``) scraping given targets every second, on a free
loopback port, with its data in a temporary directory; and ``promtool check metrics`` on a scrape."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from testing.broker import free_port
from testing.process import stop_process

INSTALL_HINT = "apt-get install -y --no-install-recommends prometheus (make test-servers does it)"


class PrometheusServer:
    """``prometheus`` scraping ``targets`` (``host:port`` of ``/metrics``) as job ``dagger`` every second."""

    def __init__(self, targets: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="dagger-prometheus-"))
        self.targets = targets
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError(f"prometheus is not installed: {INSTALL_HINT}")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "dagger", "static_configs": [{"targets": self.targets}]}],
        }
        (self.dir / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "prometheus.log", "w"),  # noqa: SIM115 - closed with the process
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.dir / 'prometheus.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1)
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of an instant query."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        body = json.loads(urllib.request.urlopen(url, timeout=5).read())
        return body["data"]["result"]

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def promtool_check(text: str) -> subprocess.CompletedProcess:
    """``promtool check metrics`` over an exposition text (exit 0: no problem found)."""
    binary = shutil.which("promtool")
    if binary is None:
        raise RuntimeError(f"promtool is not installed: {INSTALL_HINT}")
    return subprocess.run([binary, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
