"""An in-memory GCS-API server (``gcp-storage-emulator``) on a free loopback port, for ``gs://`` locations in tests.

Clients find it through ``STORAGE_EMULATOR_HOST`` (google-cloud-storage reads it), which :meth:`GcsServer.env`
gives; :meth:`put` stores an object.
"""

from __future__ import annotations

from testing.broker import free_port


class GcsServer:
    """``with GcsServer("bucket") as gcs: gcs.put("path/x.py", data)`` → ``gs://bucket/path/x.py``."""

    def __init__(self, bucket: str = "dagger-test"):
        self.bucket = bucket
        self.port = free_port()
        self._server = None

    @property
    def env(self) -> dict[str, str]:
        """The environment a google-cloud-storage client needs to talk to this server."""
        return {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{self.port}", "GOOGLE_CLOUD_PROJECT": "dagger-test"}

    def start(self) -> GcsServer:
        try:
            from gcp_storage_emulator.server import create_server
        except ImportError:
            raise RuntimeError("the GCS test server needs gcp-storage-emulator: make install (test extras)") from None
        self._server = create_server("127.0.0.1", self.port, in_memory=True, default_bucket=self.bucket)
        self._server.start()
        return self

    def put(self, name: str, data: bytes) -> str:
        """Store ``data`` as ``name``; returns its ``gs://`` URL."""
        import os
        from unittest import mock

        from google.cloud import storage

        with mock.patch.dict(os.environ, self.env):
            storage.Client().bucket(self.bucket).blob(name).upload_from_string(data)
        return f"gs://{self.bucket}/{name}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> GcsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
