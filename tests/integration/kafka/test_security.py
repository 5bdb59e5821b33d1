"""Kafka security that connects: SASL (PLAIN, SCRAM-SHA-256/512) and TLS (with Dagger's JKS, PKCS12 and PEM
stores, mutual TLS) for Kafka sources and the Kafka sink, against Apache Kafka's own SASL_SSL, SSL and
SASL_PLAINTEXT listeners; a wrong password's one clear last line; and no secret in what a job or
`dagger validate` prints.

Each secured broker is an Apache Kafka whose only listener the job is given is the secured one (its plaintext
listener is for the test's admin calls); the broker's certificate is made in the test by a throwaway CA.
"""

from __future__ import annotations

import json
import uuid

import pytest

from testing.broker import Broker, Listener
from testing.certs import CertificateAuthority
from testing.produce import consume_all, produce
from testing.samples import bookings
from tests.conftest import START, dagger, job, json_sink, kafka_stream, run_job

pytestmark = pytest.mark.integration
USER, PASSWORD = "dagger-reader", f"pw-{uuid.uuid4().hex[:10]}"  # a password no log may show
STORE_PASSWORD = f"store-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    authority = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    authority.broker = authority.issue("broker")
    authority.client = authority.issue("client")
    return authority


class Secured:
    """Apache Kafka with a SASL and/or TLS listener; ``bootstrap`` is that listener's address."""

    def __init__(self, ca: CertificateAuthority | None, sasl: bool, client_certificates: bool = False):
        self.ca, self.client_certificates, self.sasl = ca, client_certificates, sasl
        self.tls = ca is not None
        protocol = {(True, True): "SASL_SSL", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}[(self.tls, sasl)]
        listener = Listener(
            protocol,
            users={USER: PASSWORD} if sasl else {},
            keystore=ca.keystore(ca.broker, "PKCS12", STORE_PASSWORD) if self.tls else None,
            keystore_type="PKCS12",
            keystore_password=STORE_PASSWORD,
            truststore=ca.cert if client_certificates else None,
            client_auth="required" if client_certificates else "none",
        )
        self.broker = Broker(listener=listener)
        self.bootstrap = ""

    def __enter__(self) -> Secured:
        self.broker.start()
        self.bootstrap = self.broker.secure_bootstrap
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker.stop()

    def client(self) -> dict[str, str]:
        """What a plain client needs to get in (the test's own producer and reader)."""
        conf: dict[str, str] = {}
        if self.sasl:
            conf.update({"sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
        if self.tls:
            conf["ssl.ca.location"] = str(self.ca.cert)
            if self.client_certificates:
                conf.update(
                    {"ssl.certificate.location": str(self.ca.client.cert), "ssl.key.location": str(self.ca.client.key)}
                )
        conf["security.protocol"] = {(True, True): "SASL_SSL", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}[
            (self.tls, self.sasl)
        ]
        return conf

    def topic(self, prefix: str) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self.client()})
        for future in admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)]).values():
            future.result(30)
        return name

    def produce(self, topic: str, values: list[bytes]) -> None:
        produce(self.bootstrap, topic, ((None, v) for v in values), config=self.client())

    def read(self, topic: str, expected: int) -> list:
        return consume_all(self.bootstrap, topic, expected=expected, config=self.client())


def _sasl(mechanism: str) -> dict:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return {
        "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM": mechanism,
        "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG": (
            f'org.apache.kafka.common.security.{module} required username="{USER}" password="{PASSWORD}";'
        ),
    }


def _secured_sink(secured: Secured, topic: str, producer: dict) -> dict:
    return {**json_sink(secured, topic), "SINK_KAFKA_PRODUCER_CONFIG": json.dumps(producer)}


def _run(spark, stencil, tmp_path, secured: Secured, stream: dict, out: str, producer: dict, count: int = 12):
    """Feed ``count`` bookings straight to the broker, run the job through the secured door, return the output."""
    source = stream["SOURCE_KAFKA_TOPIC_NAMES"]
    secured.produce(source, bookings(count, START))
    data = job(stencil, [stream], "SELECT order_number FROM data_stream_0", **_secured_sink(secured, out, producer))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = secured.read(out, count)
    assert manager.counters.sinks["kafka"]["written"].value == count
    return sorted(json.loads(m.value())["order_number"] for m in rows)


@pytest.mark.parametrize(
    "mechanism",
    [
        pytest.param("PLAIN", marks=pytest.mark.variant),
        pytest.param("SCRAM-SHA-256", marks=pytest.mark.variant),
        "SCRAM-SHA-512",
    ],
)
def test_sasl_login_reads_and_writes(spark, stencil, tmp_path, mechanism):
    with Secured(None, sasl=True) as secured:
        source, out = secured.topic("sasl-in"), secured.topic("sasl-out")
        stream = kafka_stream(
            secured, source, SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_PLAINTEXT", **_sasl(mechanism)
        )
        producer = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
        # the job knows the secured listener only: its source read and its sink wrote through the login
        got = _run(spark, stencil, tmp_path, secured, stream, out, producer)
        assert got == sorted(f"order-{i}" for i in range(12))


@pytest.mark.parametrize(
    "kind", ["JKS", pytest.param("PKCS12", marks=pytest.mark.variant), pytest.param("PEM", marks=pytest.mark.variant)]
)
def test_sasl_ssl_with_each_truststore_type_dagger_users_have(spark, stencil, tmp_path, ca, kind):
    truststore = ca.truststore(kind, STORE_PASSWORD)
    with Secured(ca, sasl=True) as secured:
        source, out = secured.topic("tls-in"), secured.topic("tls-out")
        stream = kafka_stream(
            secured,
            source,
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_SSL",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL="TLSv1.2",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION=str(truststore),
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE=kind,
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD=STORE_PASSWORD,
            **_sasl("SCRAM-SHA-512"),
        )
        producer = {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.cert),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
        assert _run(spark, stencil, tmp_path, secured, stream, out, producer, count=5) == [
            f"order-{i}" for i in range(5)
        ]


@pytest.mark.parametrize(
    "kind", ["JKS", pytest.param("PKCS12", marks=pytest.mark.variant), pytest.param("PEM", marks=pytest.mark.variant)]
)
def test_mutual_tls_with_a_client_keystore(spark, stencil, tmp_path, ca, kind):
    with Secured(ca, sasl=False, client_certificates=True) as secured:
        source, out = secured.topic("mtls-in"), secured.topic("mtls-out")
        stream = kafka_stream(
            secured,
            source,
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SSL",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION=str(ca.truststore("JKS", STORE_PASSWORD)),
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD=STORE_PASSWORD,
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION=str(ca.keystore(ca.client, kind, STORE_PASSWORD)),
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD=STORE_PASSWORD,
        )
        producer = {
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.cert),
            "ssl.certificate.location": str(ca.client.cert),
            "ssl.key.location": str(ca.client.key),
        }
        assert _run(spark, stencil, tmp_path, secured, stream, out, producer, count=4) == [
            f"order-{i}" for i in range(4)
        ]


def _validate(tmp_path, stencil, stream: dict) -> tuple[int, str]:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
    done = dagger("validate", str(path))
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD": "not-the-password"},
            "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION: cannot read the JKS store",
        ),
        pytest.param(
            {"SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION": "/nowhere/truststore.jks"},
            "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION: /nowhere/truststore.jks does not exist",
            marks=pytest.mark.variant,
        ),
        (
            {"SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL": "TLSv1.1"},
            "SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL: TLSv1.1 is refused by librdkafka (it speaks TLS 1.2 and 1.3 only)",
        ),
    ],
)
def test_unusable_tls_settings_exit_2_naming_the_key_and_no_secret(broker, stencil, tmp_path, ca, change, message):
    stream = kafka_stream(
        broker,
        "anything",
        SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_SSL",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION=str(ca.truststore("JKS", STORE_PASSWORD)),
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD=STORE_PASSWORD,
        **_sasl("SCRAM-SHA-512"),
    )
    stream.update(change)
    code, output = _validate(tmp_path, stencil, stream)
    assert code == 2, output
    assert message in output.strip().splitlines()[-1]
    for secret in (PASSWORD, STORE_PASSWORD, "not-the-password"):
        assert secret not in output


@pytest.mark.variant  # a clear last line on a failed connection: tests/integration/kafka/source/test_kafka_job.py (failed login) covers it
def test_a_broker_certificate_from_another_ca_fails_naming_the_broker_and_no_secret(
    stencil, tmp_path, ca, tmp_path_factory
):
    stranger = CertificateAuthority(tmp_path_factory.mktemp("other-ca"), name="someone else")
    with Secured(ca, sasl=True) as secured:
        source = secured.topic("wrong-ca")
        stream = kafka_stream(
            secured,
            source,
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_SSL",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION=str(stranger.cert),
            **_sasl("SCRAM-SHA-512"),
        )
        path = tmp_path / "job.json"
        path.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
        done = dagger("run", str(path), "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert f"cannot list topics on {secured.bootstrap}" in last and "certificate verify failed" in last
    assert PASSWORD not in output


def test_a_secured_job_prints_no_secret(stencil, tmp_path, ca):
    with Secured(ca, sasl=True) as secured:
        source = secured.topic("quiet")
        secured.produce(source, bookings(3, START))
        stream = kafka_stream(
            secured,
            source,
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_SSL",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION=str(ca.truststore("JKS", STORE_PASSWORD)),
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD=STORE_PASSWORD,
            **_sasl("PLAIN"),
        )
        path = tmp_path / "job.json"
        path.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
        validated = dagger("validate", str(path))
        ran = dagger("-v", "run", str(path), "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), timeout=240)
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert ran.returncode == 0, ran.stderr[-3000:]
    # the log sink printed the rows: the job did read through TLS and SASL
    assert (ran.stdout + ran.stderr).count("order-") == 3
    for output in (validated.stdout + validated.stderr, ran.stdout + ran.stderr):
        assert PASSWORD not in output and STORE_PASSWORD not in output
        assert "BEGIN PRIVATE KEY" not in output


def test_a_wrong_password_ends_in_one_clear_last_line_naming_the_stream_and_the_key(stencil, tmp_path):
    with Secured(None, sasl=True) as secured:
        source = secured.topic("wrong-pw")
        stream = kafka_stream(
            secured,
            source,
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_PLAINTEXT",
            SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM="SCRAM-SHA-512",
            SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG=(
                f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" '
                'password="not-the-password";'
            ),
        )
        path = tmp_path / "job.json"
        path.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
        done = dagger("run", str(path), "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "stream 'data_stream_0'" in last and f"cannot list topics on {secured.bootstrap}" in last, last
    assert "Authentication failed" in last and "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG" in last, last
    assert "not-the-password" not in output and PASSWORD not in output


def test_a_refused_sink_login_ends_the_job_at_start_naming_the_producer_config(stencil, tmp_path):
    """The sink's producer would retry a refused login until message.timeout.ms (five minutes): the job checks
    the sink's login at start and ends at once, its last line naming the key."""
    import time

    with Secured(None, sasl=True) as secured:
        source, out = secured.topic("sink-pw-in"), secured.topic("sink-pw-out")
        secured.produce(source, bookings(3, START))
        plaintext = type("Plain", (), {"bootstrap": secured.broker.bootstrap})
        producer = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER,
            "sasl.password": "not-the-password",
        }
        data = job(
            stencil,
            [kafka_stream(plaintext, source)],
            "SELECT order_number FROM data_stream_0",
            **_secured_sink(secured, out, producer),
        )
        path = tmp_path / "job.json"
        path.write_text(json.dumps(data))
        began = time.monotonic()
        done = dagger("run", str(path), "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), timeout=240)
        took = time.monotonic() - began
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert f"SINK_KAFKA_BROKERS {secured.bootstrap}: the brokers refused the sink's connection" in last, last
    assert "Authentication failed" in last and "SINK_KAFKA_PRODUCER_CONFIG" in last, last
    assert "not-the-password" not in output and PASSWORD not in output
    assert took < 120, took  # not the producer's five-minute delivery timeout


def test_sparks_own_kafka_connector_reads_and_writes_through_sasl_ssl(spark, tmp_path, ca):
    """Spark's Kafka source and sink (spark-sql-kafka-0-10, fetched by make install) log in with SCRAM over TLS,
    the trust store a JKS file, as a Spark user configures them (kafka.* options)."""
    truststore = ca.truststore("JKS", STORE_PASSWORD)
    with Secured(ca, sasl=True) as secured:
        source, out = secured.topic("spark-in"), secured.topic("spark-out")
        secured.produce(source, bookings(20, START))
        security = {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": (
                f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" '
                f'password="{PASSWORD}";'
            ),
            "kafka.ssl.truststore.location": str(truststore),
            "kafka.ssl.truststore.type": "JKS",
            "kafka.ssl.truststore.password": STORE_PASSWORD,
        }
        reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", secured.bootstrap)
        records = reader.option("subscribe", source).option("startingOffsets", "earliest").options(**security).load()
        query = (
            records.select("value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", secured.bootstrap)
            .option("topic", out)
            .options(**security)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()
        written = sum(s["numOutputRows"] for s in [p["sink"] for p in query.recentProgress] if "numOutputRows" in s)
        rows = secured.read(out, 20)
    assert len(rows) == 20 == written
    assert sorted(r.value() for r in rows) == sorted(bookings(20, START))


def test_dagger_generate_with_a_config_produces_through_the_streams_own_login(stencil, tmp_path):
    """``dagger generate --config``: the stream's SASL keys reach the producer and the admin client that creates
    the topic (before, only its brokers did, and a secured cluster refused both)."""
    with Secured(None, sasl=True) as secured:
        topic = f"generated-{uuid.uuid4().hex[:6]}"  # missing: dagger generate creates it through the login
        stream = kafka_stream(
            secured, topic, SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_PLAINTEXT", **_sasl("PLAIN")
        )
        config = tmp_path / "job.json"
        config.write_text(json.dumps(job(stencil, [stream], "SELECT order_number FROM data_stream_0")))
        done = dagger("generate", "--config", str(config), "--count", "25", timeout=120)
        assert done.returncode == 0, done.stderr
        assert PASSWORD not in done.stdout + done.stderr
        assert len(secured.read(topic, 25)) == 25
