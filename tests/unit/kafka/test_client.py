"""Every Kafka client's settings from the keys users write (:func:`dagger.kafka.client.client_config`), with no
broker (TLS and SASL against one: tests/integration/kafka/test_security.py): a stream's librdkafka consumer, the
sink's producer, the dead letters' producer and Spark's connector. Certificates are made in ``tmp_path`` by a
throwaway CA, as there."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from dagger.kafka.client import client_config
from testing.certs import CertificateAuthority
from tests.unit.config.test_config import BASE, STREAM


def _client(**keys: str) -> dict[str, str]:
    config = load_config(data={**BASE, "STREAMS": [{**STREAM, **keys}]})
    return client_config(config.STREAMS[0].settings, "consumer", table="bookings", job_slug=config.job_slug)


SINK = {
    "SINK_TYPE": "kafka",
    "SINK_KAFKA_BROKERS": "out:9092",
    "SINK_KAFKA_TOPIC": "out",
    "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingLogMessage",
    "SINK_KAFKA_LINGER_MS": "7",
    "SINK_KAFKA_PRODUCER_CONFIG": json.dumps(
        {"sasl.username": "u", "sasl.password": "p", "sasl.mechanism": "SCRAM-SHA-512", "acks": "all"}
    ),
}


def test_one_function_gives_every_client_its_settings_by_role():
    secured = {
        "SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM": "PLAIN",
        "SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG": 'x required username="reader" password="secret";',
        "SOURCE_KAFKA_DEAD_LETTER_TOPIC": "bad-bookings",
        "SOURCE_KAFKA_INVALID_RECORD_POLICY": "dead-letter",
    }
    config = load_config(
        data={
            **BASE,
            **SINK,
            "STREAMS": [{**STREAM, **secured}],
            "DEAD_LETTER_KAFKA_TOPIC": "rejected",
            "DEAD_LETTER_KAFKA_BROKERS": "dead:9092",
            "DEAD_LETTER_KAFKA_PRODUCER_CONFIG": json.dumps({"acks": "1"}),
        }
    )
    stream, sink = config.STREAMS[0].settings, config.sink_configs[0][1].settings

    consumer = client_config(stream, "consumer", table="bookings", job_slug=config.job_slug)
    assert consumer["group.id"] == f"dagger-{config.job_slug}-bookings"
    assert (consumer["sasl.username"], consumer["sasl.password"]) == ("reader", "secret")  # JAAS for librdkafka

    java = client_config(stream, "spark_consumer")  # Dagger's keys are the Java client's own names
    assert java["sasl.jaas.config"] == 'x required username="reader" password="secret";'
    assert java["bootstrap.servers"] == "127.0.0.1:9092" and "group.id" not in java

    producer = client_config(sink, "producer")
    assert producer["bootstrap.servers"] == "out:9092" and producer["linger.ms"] == "7"
    assert producer["sasl.username"] == "u" and producer["acks"] == "all"
    assert producer["delivery.report.only.error"] is True  # confluent-kafka reads it as a bool

    spark_producer = client_config(sink, "spark_producer")  # librdkafka's names translated for the Java client
    assert spark_producer["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    )
    assert spark_producer["linger.ms"] == "7" and "sasl.username" not in spark_producer

    assert client_config(config, "dead_letters") == {"bootstrap.servers": "dead:9092", "acks": "1"}
    own = client_config(stream, "stream_dead_letters", table="bookings")  # the stream's own topic, on its own cluster
    assert own == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "reader",
        "sasl.password": "secret",
    }

    # dagger generate --config: the stream's topic, on the stream's cluster, with its security (the stream sets no
    # dead-letter brokers)
    assert client_config(stream, "stream_producer", table="bookings") == own

    with pytest.raises(ValueError, match="no Kafka client plays 'admin'; the roles: consumer, spark_consumer"):
        client_config(stream, "admin")  # type: ignore[arg-type]


def test_additional_configurations_are_passed_to_librdkafka_as_they_are_and_win_over_daggers_own():
    extra = {"fetch.min.bytes": "4096", "reconnect.backoff.max.ms": "5000"}
    conf = _client(SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS=json.dumps(extra))
    assert conf["fetch.min.bytes"] == "4096"
    assert conf["reconnect.backoff.max.ms"] == "5000"  # Dagger's own is 1000


def test_a_keystore_declared_pem_is_handed_to_librdkafka_as_a_file_though_it_does_not_start_like_one(tmp_path):
    ca = CertificateAuthority(tmp_path)
    pem = ca.keystore(ca.issue("client"), "PEM", "unused")
    keystore = tmp_path / "client-openssl.pem"  # as `openssl pkcs12 -nodes` writes it: attributes before the PEM
    keystore.write_bytes(b"Bag Attributes\n    friendlyName: client\n" + pem.read_bytes())
    conf = _client(
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION=str(keystore),
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_TYPE="PEM",
    )
    assert (conf["ssl.certificate.location"], conf["ssl.key.location"]) == (str(keystore), str(keystore))
    assert "ssl.certificate.pem" not in conf
    # undeclared, the file is taken for what it looks like, a PKCS12 store, which it is not
    with pytest.raises(DaggerConfigError, match="cannot read the PKCS12 store"):
        _client(SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION=str(keystore))


def test_the_key_password_opens_the_encrypted_key_of_a_pem_keystore(tmp_path):
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("client")
    key = serialization.load_pem_private_key(issued.key.read_bytes(), password=None)
    keystore = tmp_path / "client-encrypted.pem"
    keystore.write_bytes(
        issued.cert.read_bytes()
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-pw-7f2e"),
        )
    )
    conf = _client(
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION=str(keystore),
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD="key-pw-7f2e",
    )
    assert conf["ssl.key.location"] == str(keystore)
    assert conf["ssl.key.password"] == "key-pw-7f2e"


def test_the_key_password_opens_a_jks_keystores_key_kept_under_its_own_password(tmp_path):
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("client")
    keystore = ca.keystore(issued, "JKS", "store-pw-1", key_password="key-pw-2")
    conf = _client(
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION=str(keystore),
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD="store-pw-1",
        SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD="key-pw-2",
    )
    key = serialization.load_pem_private_key(conf["ssl.key.pem"].encode(), password=None)
    ours = serialization.load_pem_private_key(issued.key.read_bytes(), password=None)
    assert key.private_numbers() == ours.private_numbers()
    assert conf["ssl.certificate.pem"].startswith(issued.cert.read_text())
    # the key's own password missing: keytool cannot open the key, and the message says so without the secret
    with pytest.raises(DaggerConfigError, match="cannot read the JKS store") as refused:
        _client(
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION=str(keystore),
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD="store-pw-1",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD="wrong-pw",
        )
    assert "wrong-pw" not in str(refused.value) and "store-pw-1" not in str(refused.value)
