"""What librdkafka says of brokers that do not serve a client, kept for the message that ends a job:
:class:`BrokerErrors` is a client's ``error_cb`` and remembers librdkafka's own reason (a refused connection, DNS,
TLS), which a metadata timeout alone does not say, and a refusal (a login or a TLS handshake) that no waiting can
help; :func:`refusal_kind` says which of the two a reason is. Dagger's reader and writer both ask it (each names
its own keys in the hint). Runs on the driver, where the clients that first reach the brokers are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass
class BrokerErrors:
    """A librdkafka client's ``error_cb``: the last reason it gave, and the first refusal."""

    #: librdkafka's latest reason, but "all brokers are down", which follows the reason it keeps
    last: str | None = None
    #: a login or TLS refusal: not an outage, waiting cannot help
    refused: str | None = None

    def __call__(self, error: Any) -> None:
        from confluent_kafka import KafkaError  # start-up: loads librdkafka

        if error.code() != KafkaError._ALL_BROKERS_DOWN:
            self.last = error.str()
        if self.refused is None and error.code() in (
            KafkaError._AUTHENTICATION,
            KafkaError._SSL,
            KafkaError.SASL_AUTHENTICATION_FAILED,
        ):
            self.refused = error.str()


def refusal_kind(reason: str) -> Literal["login", "tls"] | None:
    """What a reason is about: the login (SASL), the TLS handshake, or neither (None: reach, address, outage)."""
    text = reason.lower()
    if "authentication" in text or "sasl" in text:
        return "login"
    if "ssl" in text or "certificate" in text or "tls" in text:
        return "tls"
    return None
