"""A Kafka stream's librdkafka consumer settings from its ``SOURCE_KAFKA_CONSUMER_*`` keys, with no broker (TLS
and SASL against one: tests/integration/sources/test_kafka_security.py). Certificates are made in ``tmp_path``
by a throwaway CA, as there."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from dagger.sources.kafka.client import client_config
from testing.certs import CertificateAuthority
from tests.unit.config.test_config import BASE, STREAM


def _client(**keys: str) -> dict[str, str]:
    config = load_config(data={**BASE, "STREAMS": [{**STREAM, **keys}]})
    return client_config(config.STREAMS[0], config.job_slug)


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
