"""A gRPC proxy on a loopback port that forwards every call to a real server, or answers them all with an error.

The tests put it in front of the BigQuery emulator's Storage Write API to play a service that answers 500
(``INTERNAL``) or is unavailable for a while, then heals, without touching the emulator or what it stores.
Messages pass through as bytes (no stubs needed): unary calls and bidirectional streams (``AppendRows``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

from testing.broker import free_port

_STREAMING = ("AppendRows",)  # the Storage Write API's one bidirectional method; the others are unary


class GrpcFaultProxy:
    """Forwards ``127.0.0.1:port`` to ``target`` (``host:port``). :meth:`fail` makes calls end with a status code
    (``"INTERNAL"``, ``"UNAVAILABLE"``...), :meth:`heal` forwards again; ``failed`` counts refused calls."""

    def __init__(self, target: str, port: int | None = None):
        self.target = target
        self.port = port or free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.failed = 0
        self._code: Any = None
        self._left: int | None = None
        self._lock = threading.Lock()
        self._server: Any = None
        self._channel: Any = None

    def fail(self, code: str = "INTERNAL", calls: int | None = None) -> None:
        """Answer calls with ``code``: the next ``calls`` of them, or all until :meth:`heal`."""
        import grpc

        self._left = calls
        self._code = getattr(grpc.StatusCode, code)

    def heal(self) -> None:
        self._code = None

    def _refuse(self, context: Any) -> None:
        with self._lock:
            code = self._code
            if code is None:
                return
            self.failed += 1
            if self._left is not None:
                self._left -= 1
                if self._left <= 0:
                    self._code = None
        context.abort(code, f"injected by the test's proxy: {code.name}")

    def start(self) -> GrpcFaultProxy:
        import grpc

        self._channel = grpc.insecure_channel(self.target, options=[("grpc.max_send_message_length", 64 << 20)])
        proxy = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details: Any) -> Any:
                method = details.method
                if method.rsplit("/", 1)[-1] in _STREAMING:
                    forward = proxy._channel.stream_stream(method)

                    def stream(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
                        proxy._refuse(context)
                        try:
                            yield from forward(requests, metadata=context.invocation_metadata())
                        except grpc.RpcError as exc:  # the server's own error, passed on as it is
                            context.abort(exc.code(), exc.details())

                    return grpc.stream_stream_rpc_method_handler(stream)
                forward_unary = proxy._channel.unary_unary(method)

                def unary(request: bytes, context: Any) -> bytes:
                    proxy._refuse(context)
                    try:
                        return forward_unary(request, metadata=context.invocation_metadata())
                    except grpc.RpcError as exc:
                        context.abort(exc.code(), exc.details())

                return grpc.unary_unary_rpc_method_handler(unary)

        self._server = grpc.server(
            futures.ThreadPoolExecutor(16), options=[("grpc.max_receive_message_length", 64 << 20)]
        )
        self._server.add_generic_rpc_handlers((Handler(),))
        self._server.add_insecure_port(self.endpoint)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0)
        if self._channel is not None:
            self._channel.close()

    def __enter__(self) -> GrpcFaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
