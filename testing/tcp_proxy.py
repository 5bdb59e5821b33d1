"""A TCP proxy on a loopback port that can be cut and restored: a service that becomes unreachable and comes
back, with what it stores intact, and a flaky service whose next connections are reset."""

from __future__ import annotations

import socket
import struct
import threading

from testing.broker import free_port


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; :meth:`cut` closes every connection and refuses new ones,
    :meth:`restore` accepts again on the same port."""

    def __init__(
        self,
        target: tuple[str, int],
        port: int | None = None,
    ):
        self.target = target
        self.port = port or free_port()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        self._reset = 0  # connections still to reset at once (reset_next)
        self.resets = 0  # connections reset so far

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut or stopped
            with self._lock:
                reset = self._reset > 0
                if reset:
                    self._reset -= 1
                    self.resets += 1
            if reset:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._sockets.update((client, upstream))
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Close the listening socket and every open connection: clients see the service go away."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            try:  # wakes the thread blocked in accept(): until it returns, close() alone leaves the port listening
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for s in sockets:
            try:  # reset, not a graceful close: no socket lingers on the port, so restore() can listen at once
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            s.close()

    def reset_next(self, connections: int) -> None:
        """Reset the next ``connections`` new connections as soon as they are made (a flaky service: the clients
        must retry); ``resets`` counts them."""
        with self._lock:
            self._reset = connections

    def restore(self) -> None:
        """Accept connections again."""
        if self._listener is None:
            self.start()

    def stop(self) -> None:
        self.cut()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
