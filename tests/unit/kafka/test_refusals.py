"""What librdkafka says of brokers, as Dagger's reader and writer keep it (librdkafka's own KafkaError values)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from dagger.kafka.refusals import BrokerErrors, refusal_kind


def test_a_refusal_is_kept_and_all_brokers_down_does_not_hide_the_reason_before_it():
    errors = BrokerErrors()
    errors(KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed"))
    errors(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert errors.last == "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed"
    assert errors.refused is None  # an outage: waiting can help
    errors(KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed"))
    errors(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "SASL authentication error: Authentication failed"))
    assert errors.refused == "SSL handshake failed: certificate verify failed"  # the first refusal
    assert errors.last == "SASL authentication error: Authentication failed"


def test_refusal_kind_names_the_login_or_the_handshake():
    assert refusal_kind("SASL authentication error: Authentication failed during authentication") == "login"
    assert refusal_kind("SSL handshake failed: certificate verify failed") == "tls"
    assert refusal_kind("Connect to ipv4#127.0.0.1:9 failed: Connection refused") is None
