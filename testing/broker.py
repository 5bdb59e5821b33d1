"""Start and stop Apache Kafka (single node, KRaft) on free loopback ports, for tests, the quickstart and the bench.

The broker's jars come from Maven Central (``org.apache.kafka:kafka_2.13`` and its dependencies), fetched by
``make install`` into ``<DAGGER_NATIVE_CACHE>/jars/kafka-<version>/`` (:func:`fetch_kafka`). Each broker gets its
own temporary log directory, formatted by writing ``meta.properties`` (what ``kafka-storage format`` writes for a
static quorum; it saves a JVM start), and is gone when the broker stops.

A broker may also serve a secured listener (:class:`Listener`): SASL_SSL, SSL or SASL_PLAINTEXT with PLAIN and
SCRAM users and TLS key and trust stores in PEM, PKCS12 or JKS, mutual TLS with ``client_auth="required"``.
``bootstrap`` is always the plaintext listener (the tests' own admin, producer and reader);
``secure_bootstrap`` the secured one.
"""

from __future__ import annotations

import base64
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from testing.process import stop_process

KAFKA_VERSION = "4.1.1"
#: the broker, and the log4j binding Kafka's own distribution ships (the Maven artifact leaves it out)
KAFKA_BROKER = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3")

_LOG4J = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


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


def kafka_jars_dir() -> Path:
    from dagger.session.jars import cache_root

    return cache_root() / f"kafka-{KAFKA_VERSION}"


def fetch_kafka() -> Path:
    """Fetch the broker's jars (``make install`` does, through ``python -m testing.broker fetch``)."""
    from dagger.session.jars import fetch

    fetch(list(KAFKA_BROKER), kafka_jars_dir())
    return kafka_jars_dir()


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("Apache Kafka needs Java 17+: apt-get install openjdk-17-jre-headless (make install does)")
    return java


def _kafka_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass
class Listener:
    """A secured listener: ``protocol`` SASL_SSL | SSL | SASL_PLAINTEXT; ``users`` log in with each of
    ``mechanisms`` (PLAIN and SCRAM-SHA-256/512); ``keystore``/``truststore`` are paths with their type
    (PEM, PKCS12, JKS) and password; ``client_auth`` = required for mutual TLS."""

    protocol: str = "SASL_SSL"
    users: dict[str, str] = field(default_factory=dict)
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    keystore: Path | None = None
    keystore_type: str = "PEM"
    keystore_password: str | None = None
    truststore: Path | None = None
    truststore_type: str = "PEM"
    truststore_password: str | None = None
    client_auth: str = "none"
    port: int = 0

    def properties(self) -> dict[str, str]:
        name = "secure"
        props: dict[str, str] = {}
        if "SASL" in self.protocol:
            props[f"listener.name.{name}.sasl.enabled.mechanisms"] = ",".join(self.mechanisms)
            for mechanism in self.mechanisms:
                key = f"listener.name.{name}.{mechanism.lower()}.sasl.jaas.config"
                if mechanism == "PLAIN":
                    users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
                    props[key] = f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
                else:  # SCRAM users are created through the admin API once the broker runs
                    props[key] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        if "SSL" in self.protocol:
            prefix = f"listener.name.{name}."
            if self.keystore is not None:
                props[prefix + "ssl.keystore.location"] = str(self.keystore)
                props[prefix + "ssl.keystore.type"] = self.keystore_type
                if self.keystore_password:
                    props[prefix + "ssl.keystore.password"] = self.keystore_password
                    if self.keystore_type != "PEM":
                        props[prefix + "ssl.key.password"] = self.keystore_password
            if self.truststore is not None:
                props[prefix + "ssl.truststore.location"] = str(self.truststore)
                props[prefix + "ssl.truststore.type"] = self.truststore_type
                if self.truststore_password:
                    props[prefix + "ssl.truststore.password"] = self.truststore_password
            props[prefix + "ssl.client.auth"] = self.client_auth
        return props


class Broker:
    """Apache Kafka, one node in KRaft mode; use as a context manager or call :meth:`start` / :meth:`stop`.

    ``advertised_port`` is where clients are told to connect (a fault proxy in front of the broker); the broker's
    own port if None. A broker behind such a proxy also serves a second plaintext listener advertised as itself,
    ``direct_bootstrap``, for clients that must not go through the proxy (a job's sink while its source's
    brokers are cut)."""

    def __init__(
        self,
        port: int | None = None,
        log_path: str | Path | None = None,
        advertised_port: int | None = None,
        listener: Listener | None = None,
        heap: str = "512m",
    ):
        self.port = port or free_port()
        self.controller_port = free_port()
        self.advertised_port = advertised_port or self.port
        self.bootstrap = f"127.0.0.1:{self.advertised_port}"
        self.direct_port = free_port() if self.advertised_port != self.port else None
        self.direct_bootstrap = f"127.0.0.1:{self.direct_port or self.port}"
        self.listener = listener
        if listener is not None and not listener.port:
            listener.port = free_port()
        self.secure_bootstrap = f"127.0.0.1:{listener.port}" if listener is not None else None
        self.log_path = Path(log_path) if log_path else None
        self.heap = heap
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None

    def properties(self, data_dir: Path) -> dict[str, str]:
        listeners = {"PLAINTEXT": self.port, "CONTROLLER": self.controller_port}
        protocols = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
        advertised = [f"PLAINTEXT://127.0.0.1:{self.advertised_port}"]
        if self.direct_port is not None:
            listeners["DIRECT"] = self.direct_port
            protocols["DIRECT"] = "PLAINTEXT"
            advertised.append(f"DIRECT://127.0.0.1:{self.direct_port}")
        if self.listener is not None:
            listeners["SECURE"] = self.listener.port
            protocols["SECURE"] = self.listener.protocol
            advertised.append(f"SECURE://127.0.0.1:{self.listener.port}")
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items()),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
            "log.dirs": str(data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            # a test broker: deletes take effect at once, nothing is kept past the run
            "log.segment.delete.delay.ms": "1000",
            # and nothing is deleted by age during it: the tests' records carry fixed event times (2026-11-01 and
            # the like), and Kafka's default retention (168 h, checked every 5 min, the first 30 s after start)
            # deleted the records of a test that spanned a check once those dates were a week old
            "log.retention.ms": "-1",
            "file.delete.delay.ms": "1000",
        }
        if self.listener is not None:
            props.update(self.listener.properties())
        return props

    def start(self, timeout: float = 60.0) -> Broker:
        jars = kafka_jars_dir()
        if not (jars / ".complete").exists():
            raise RuntimeError(
                f"Apache Kafka's jars are not in {jars}: run `make install` (python -m testing.broker fetch)"
            )
        self.workdir = Path(tempfile.mkdtemp(prefix="dagger-kafka-"))
        data = self.workdir / "data"
        data.mkdir()
        (data / "meta.properties").write_text(
            f"version=1\ncluster.id={_kafka_uuid()}\nnode.id=1\ndirectory.id={_kafka_uuid()}\n"
        )
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={_escape(v)}\n" for k, v in self.properties(data).items()))
        log4j = self.workdir / "log4j2.yaml"
        log4j.write_text(_LOG4J)
        out = open(self.log_path, "wb") if self.log_path else open(self.workdir / "kafka.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                _java(),
                f"-Xmx{self.heap}",
                "-XX:+UseSerialGC",
                "-Xshare:auto",
                f"-Dlog4j2.configurationFile={log4j}",
                "-cp",
                f"{jars}/*",
                "kafka.Kafka",
                str(config),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        deadline = time.monotonic() + timeout
        try:
            self._wait_ready(deadline)
        except RuntimeError:
            self.stop()
            raise
        listener = self.listener
        if listener is not None and "SASL" in listener.protocol and listener.users:
            scram = [m for m in listener.mechanisms if m.startswith("SCRAM")]
            if scram:
                self.add_scram_users(listener.users, scram)
        return self

    @property
    def log_file(self) -> Path | None:
        return self.log_path or (self.workdir / "kafka.log" if self.workdir else None)

    def _log_tail(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-2000:] if self.log_file else ""
        except OSError:
            return ""

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with code {self.process.returncode}:\n{self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"Apache Kafka did not listen on 127.0.0.1:{self.port}:\n{self._log_tail()}")
        # its own port: whatever stands at the advertised one (a proxy) may not be up yet
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port}"})
        while time.monotonic() < deadline:
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001
                time.sleep(0.1)
        raise RuntimeError(f"Apache Kafka on 127.0.0.1:{self.port} does not answer metadata requests")

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port}"})

    def add_scram_users(self, users: dict[str, str], mechanisms: list[str]) -> None:
        """SCRAM credentials for ``users``, one request per mechanism (Kafka refuses two of one user at once)."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = self.admin()  # kept until the futures resolve: a collected client fails them
        for mechanism in mechanisms:
            kind = getattr(ScramMechanism, mechanism.replace("-", "_"))
            upserts = [
                UserScramCredentialUpsertion(user, ScramCredentialInfo(kind, 4096), password.encode())
                for user, password in users.items()
            ]
            for future in admin.alter_user_scram_credentials(upserts).values():
                future.result(30)

    def stop(self) -> None:
        stop_process(self.process, timeout=20)
        self.process = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
        """Create a topic and wait until its metadata shows every partition with a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
        )
        for future in futures.values():
            future.result(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {name} did not appear with {partitions} partitions")

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its records."""
        admin = self.admin()
        for future in admin.delete_topics([name]).values():
            future.result(30)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _escape(value: str) -> str:
    """A value as a Java .properties line holds it (backslashes doubled)."""
    return value.replace("\\", "\\\\")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["fetch"]:
        raise SystemExit("usage: python -m testing.broker fetch")
    print(fetch_kafka())
