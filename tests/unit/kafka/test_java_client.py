"""librdkafka's producer settings (SINK_KAFKA_PRODUCER_CONFIG) translated for the Java client that Spark's Kafka sink
writes with in real-time mode (dagger.kafka.java_client)."""

from __future__ import annotations

import pytest

from dagger.errors import DaggerConfigError
from dagger.kafka.java_client import producer_options


def test_sasl_username_and_password_become_the_mechanisms_jaas_login(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    out = producer_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "dagger",
            "sasl.password": 'p"w\\d',
            "ssl.ca.location": str(ca),
            "ssl.endpoint.identification.algorithm": "none",
            "linger.ms": "5",
            "message.timeout.ms": "60000",
            "queue.buffering.max.kbytes": "2048",
            "batch.num.messages": "10000",
        },
        "SINK_KAFKA_PRODUCER_CONFIG",
    )
    assert out == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="dagger" '
        'password="p\\"w\\\\d";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": ca.read_text(),
        "ssl.endpoint.identification.algorithm": "",
        "linger.ms": "5",
        "delivery.timeout.ms": "60000",
        "buffer.memory": str(2048 * 1024),
    }


def test_a_client_certificate_and_key_become_a_pem_key_store(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("CERT")
    key.write_text("KEY")
    out = producer_options(
        {"security.protocol": "SSL", "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}, "K"
    )
    assert out["ssl.keystore.type"] == "PEM"
    assert (out["ssl.keystore.certificate.chain"], out["ssl.keystore.key"]) == ("CERT", "KEY")
    with pytest.raises(DaggerConfigError, match="needs both ssl.certificate.location and ssl.key.location"):
        producer_options({"ssl.certificate.location": str(cert)}, "K")


def test_settings_with_no_java_counterpart_are_refused_naming_them(tmp_path):
    with pytest.raises(DaggerConfigError, match="K: enable.ssl.certificate.verification has no counterpart"):
        producer_options({"enable.ssl.certificate.verification": "false"}, "K")
    with pytest.raises(DaggerConfigError, match="K: frobnicate is a setting of neither"):
        producer_options({"frobnicate": "1"}, "K", known={"linger.ms"})
    with pytest.raises(DaggerConfigError, match="K: ssl.ca.location: cannot read"):
        producer_options({"ssl.ca.location": str(tmp_path / "missing.pem")}, "K")
    with pytest.raises(DaggerConfigError, match="sasl.mechanism GSSAPI"):
        producer_options({"sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"}, "K")
