"""Serve a directory of descriptor sets over HTTP (the Stencil role in the quickstart and the tests)."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class DescriptorServer:
    """A threaded HTTP server on a free loopback port serving ``directory``."""

    def __init__(self, directory: str | Path):
        handler = functools.partial(_Quiet, directory=str(directory))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def start(self) -> DescriptorServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> DescriptorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
