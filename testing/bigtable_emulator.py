"""The Bigtable emulator of the Google Cloud CLI (``cbtemulator``) on a free loopback port, for Longbow.

Clients find it through ``BIGTABLE_EMULATOR_HOST`` (google-cloud-bigtable reads it), which
:attr:`BigtableEmulator.env` gives. The emulator keeps everything in memory and accepts any project and
instance; it ships with the Cloud CLI (Debian package ``google-cloud-cli-bigtable-emulator``) as
``platform/bigtable-emulator/cbtemulator`` under the SDK.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from testing.broker import free_port
from testing.process import stop_process

INSTALL_HINT = (
    "install the Cloud CLI's emulator (apt-get install google-cloud-cli-bigtable-emulator, or gcloud components "
    "install bigtable), or set CBTEMULATOR to the cbtemulator binary"
)
#: where the Cloud CLI puts the binary (Debian's packages, and an SDK unpacked under /opt or the home directory)
SDK_ROOTS = ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk")


def find_binary() -> str | None:
    """``cbtemulator``: ``$CBTEMULATOR``, on the PATH, or in a Cloud SDK's ``platform/bigtable-emulator``."""
    given = os.environ.get("CBTEMULATOR")
    if given:
        return given if Path(given).is_file() else None
    found = shutil.which("cbtemulator")
    if found:
        return found
    gcloud = shutil.which("gcloud")
    roots = [*SDK_ROOTS, str(Path.home() / "google-cloud-sdk")]
    if gcloud:
        roots.insert(0, str(Path(os.path.realpath(gcloud)).parents[1]))
    for root in roots:
        candidate = Path(root) / "platform" / "bigtable-emulator" / "cbtemulator"
        if candidate.is_file():
            return str(candidate)
    return None


class BigtableEmulator:
    """``with BigtableEmulator() as bigtable: ...`` with ``bigtable.env`` in the environment of the job."""

    def __init__(self) -> None:
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="dagger-bigtable-"))
        self.process: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment a google-cloud-bigtable client needs to talk to this emulator."""
        return {"BIGTABLE_EMULATOR_HOST": self.host}

    def start(self, timeout: float = 30.0) -> BigtableEmulator:
        binary = find_binary()
        if binary is None:
            raise RuntimeError(f"the Bigtable emulator (cbtemulator) is not installed: {INSTALL_HINT}")
        log = open(self.dir / "cbtemulator.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [binary, "-host", "127.0.0.1", "-port", str(self.port)], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"cbtemulator exited with code {self.process.returncode}; see {self.dir}/cbtemulator.log"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"cbtemulator did not listen on {self.host} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, 10)
            self.process = None

    def __enter__(self) -> BigtableEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
