"""The server side of Kafka's SASL login (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), for a proxy in front of the embedded
broker: tansu 0.6 requires a login with ``--authentication`` but cannot be given a user (docs/brokers.md, defect
5), so tests of a successful login put this gate in front of an open broker (:class:`~dagger.devtools.tcp_proxy.
TcpProxy`'s ``gate``). The client speaks to the gate until it is logged in; then the gate steps aside and the
connection is piped to the broker byte for byte.

The gate answers ``SaslHandshake`` (v0-v1) and ``SaslAuthenticate`` (v0-v2) itself and forwards ``ApiVersions``
(which must come first) to the broker; any other request before a login is refused by closing the connection, as
a broker that requires a login does. SCRAM is computed by ``scramp``.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed Kafka frame's payload."""
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    return _read_exact(sock, size)


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(data: bytes, at: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", data, at)
    at += 2
    if n < 0:
        return None, at
    return data[at : at + n].decode(), at + n


def _put_string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


@dataclass
class SaslGate:
    """Logs Kafka clients in with ``users`` (name → password) before they reach the broker.

    ``logins`` counts successful logins per mechanism, ``failures`` the refused ones (for tests to assert on).
    """

    users: dict[str, str]
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    logins: dict[str, int] = field(default_factory=dict)
    failures: int = 0

    def __call__(self, client: socket.socket, upstream: socket.socket) -> bool:
        """Run the login on ``client``; True once logged in (the caller then pipes), False to close."""
        mechanism: str | None = None
        scram = None
        try:
            while True:
                request = read_frame(client)
                key, version, correlation = struct.unpack_from(">hhi", request, 0)
                if key == API_VERSIONS:
                    upstream.sendall(struct.pack(">i", len(request)) + request)
                    response = read_frame(upstream)
                    client.sendall(struct.pack(">i", len(response)) + response)
                    continue
                body = self._body(request, flexible=key == SASL_AUTHENTICATE and version >= 2)
                if key == SASL_HANDSHAKE:
                    mechanism, _ = _string(request, body)
                    ok = mechanism in self.mechanisms
                    self._reply(
                        client,
                        correlation,
                        struct.pack(">hi", 0 if ok else UNSUPPORTED_SASL_MECHANISM, len(self.mechanisms))
                        + b"".join(_put_string(m) for m in self.mechanisms),
                    )
                    if not ok:
                        return False
                    if mechanism.startswith("SCRAM"):
                        from scramp import ScramMechanism

                        scram = ScramMechanism(mechanism).make_server(self._auth_info(mechanism))
                    continue
                if key != SASL_AUTHENTICATE or mechanism is None:
                    return False  # a request before a login: a broker that requires one closes the connection
                flexible = version >= 2
                token = self._bytes(request, body, flexible)
                done, error, answer = self._step(mechanism, scram, token)
                self._authenticate_reply(client, correlation, version, error, answer)
                if error:
                    self.failures += 1
                    return False
                if done:
                    self.logins[mechanism] = self.logins.get(mechanism, 0) + 1
                    return True
        except (ConnectionError, OSError, struct.error, IndexError):
            return False

    # -- the mechanisms -----------------------------------------------------------------------------------------

    def _auth_info(self, mechanism: str):  # noqa: ANN202
        from scramp import ScramMechanism

        kind = ScramMechanism(mechanism)
        table = {name: kind.make_auth_info(password, iteration_count=4096) for name, password in self.users.items()}

        def lookup(name: str):  # noqa: ANN202
            if name not in table:
                raise KeyError(name)
            return table[name]

        return lookup

    def _step(self, mechanism: str, scram, token: bytes) -> tuple[bool, str | None, bytes]:  # noqa: ANN001
        """(logged in, error message or None, bytes for the client) for one SaslAuthenticate."""
        if mechanism == "PLAIN":
            parts = token.split(b"\0")
            if len(parts) == 3 and self.users.get(parts[1].decode()) == parts[2].decode():
                return True, None, b""
            return False, "Authentication failed: invalid username or password", b""
        from scramp import ScramException

        try:
            if scram.stage is None:
                scram.set_client_first(token.decode())
                return False, None, scram.get_server_first().encode()
            scram.set_client_final(token.decode())
            return True, None, scram.get_server_final().encode()
        except (ScramException, KeyError) as exc:
            return (
                False,
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}: {exc}",
                b"",
            )

    # -- the wire -----------------------------------------------------------------------------------------------

    @staticmethod
    def _body(request: bytes, flexible: bool) -> int:
        """Where the request's body starts: after key, version, correlation id, client id (and tagged fields)."""
        _, at = _string(request, 8)
        if flexible:
            tags, at = _uvarint(request, at)
            for _ in range(tags):
                _, at = _uvarint(request, at)
                size, at = _uvarint(request, at)
                at += size
        return at

    @staticmethod
    def _bytes(request: bytes, at: int, flexible: bool) -> bytes:
        if flexible:
            size, at = _uvarint(request, at)
            return request[at : at + size - 1]
        (size,) = struct.unpack_from(">i", request, at)
        return request[at + 4 : at + 4 + size]

    @staticmethod
    def _reply(client: socket.socket, correlation: int, body: bytes, flexible: bool = False) -> None:
        payload = struct.pack(">i", correlation) + (b"\0" if flexible else b"") + body
        client.sendall(struct.pack(">i", len(payload)) + payload)

    def _authenticate_reply(
        self, client: socket.socket, correlation: int, version: int, error: str | None, answer: bytes
    ) -> None:
        code = struct.pack(">h", SASL_AUTHENTICATION_FAILED if error else 0)
        if version >= 2:
            message = _put_uvarint(0) if error is None else _put_uvarint(len(error.encode()) + 1) + error.encode()
            body = code + message + _put_uvarint(len(answer) + 1) + answer + struct.pack(">q", 0) + b"\0"
            self._reply(client, correlation, body, flexible=True)
            return
        body = code + _put_string(error) + struct.pack(">i", len(answer)) + answer
        if version >= 1:
            body += struct.pack(">q", 0)  # session lifetime: none
        self._reply(client, correlation, body)
