"""librdkafka's producer settings (SINK_KAFKA_PRODUCER_CONFIG) translated for the Java client that Spark's Kafka sink
writes with in real-time mode (dagger.kafka.java_client)."""

from __future__ import annotations

import pytest

from dagger.errors import DaggerConfigError
from dagger.kafka.java_client import fit_delivery_timeout, producer_options


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


@pytest.mark.parametrize(
    "given, request_timeout",
    [
        ({"delivery.timeout.ms": "3000"}, "2995"),  # librdkafka's message.timeout.ms of 3 s: each request fits in it
        ({"delivery.timeout.ms": "3000", "linger.ms": "0"}, "3000"),
        ({"delivery.timeout.ms": "300000"}, None),  # the Java client's 30 s request timeout fits: left to it
        ({"linger.ms": "5"}, None),
        ({"delivery.timeout.ms": "3000", "request.timeout.ms": "2000"}, "2000"),
    ],
)
def test_the_request_timeout_fits_in_the_delivery_timeout_as_the_java_client_requires(given, request_timeout):
    out = fit_delivery_timeout(given, "SINK_KAFKA_PRODUCER_CONFIG")
    assert out.get("request.timeout.ms") == request_timeout
    delivery = int(given.get("delivery.timeout.ms", 300_000))
    assert out.get("max.block.ms") == (given["delivery.timeout.ms"] if delivery < 60_000 else None)
    assert {k: v for k, v in out.items() if k not in ("request.timeout.ms", "max.block.ms")} == {
        k: v for k, v in given.items() if k != "request.timeout.ms"
    }


def test_a_request_timeout_longer_than_the_delivery_timeout_is_refused_naming_both():
    with pytest.raises(DaggerConfigError) as raised:
        fit_delivery_timeout(
            {"delivery.timeout.ms": "3000", "request.timeout.ms": "10000"}, "SINK_KAFKA_PRODUCER_CONFIG"
        )
    assert str(raised.value) == (
        "SINK_KAFKA_PRODUCER_CONFIG: message.timeout.ms 3000 is shorter than request.timeout.ms 10000 plus the linger "
        "of 5 ms, which Spark's Kafka sink (the Java client) refuses: give a request.timeout.ms of at most 2995, or "
        "leave it out"
    )
