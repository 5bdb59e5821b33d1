"""Helpers shared by the local servers the devtools start (broker, InfluxDB, BigQuery emulator)."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen | None, timeout: float = 10) -> None:
    """Terminate ``process`` if it still runs; kill it when it has not exited after ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)
