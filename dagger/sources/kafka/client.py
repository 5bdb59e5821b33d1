"""A Kafka stream's librdkafka consumer settings, from its ``SOURCE_KAFKA_CONSUMER_CONFIG_*`` keys: brokers, group,
SASL, TLS (Java key and trust stores read once into PEM, :mod:`dagger.kafka.tls`) and any additional settings.
Runs on the driver; the settings travel to executors in the reader's spec."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dagger.errors import DaggerConfigError
from dagger.kafka.tls import keystore_pem, store_type, truststore_pem

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig


_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def client_config(stream: StreamConfig, job_slug: str, large_messages: bool = False) -> dict[str, str]:
    """librdkafka consumer settings from a stream's ``SOURCE_KAFKA_CONSUMER_CONFIG_*`` keys."""
    conf: dict[str, str] = {
        "bootstrap.servers": stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS,
        "group.id": stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID
        or f"dagger-{job_slug}-{stream.INPUT_SCHEMA_TABLE}",
        "auto.offset.reset": stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET,
        # librdkafka's reconnect backoff grows to 10 s during an outage, so a job went on up to 10 s after its
        # brokers were back (and a request in that time said they did not answer, a second time); 1 s here
        "reconnect.backoff.max.ms": "1000",
    }
    table = stream.INPUT_SCHEMA_TABLE
    if stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL:
        conf["security.protocol"] = stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL
    if stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM:
        conf["sasl.mechanism"] = stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM
    if stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG:
        found = dict(_JAAS.findall(stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG))
        if "username" not in found or "password" not in found:
            raise DaggerConfigError(
                f"STREAMS[{table}].SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG must contain "
                'username="..." and password="..." (e.g. org.apache.kafka.common.security.plain.PlainLoginModule '
                'required username="u" password="p";)'
            )
        conf["sasl.username"] = found["username"]
        conf["sasl.password"] = found["password"]
    conf.update(_tls_config(stream))
    if large_messages:
        conf["max.partition.fetch.bytes"] = "5242880"
    conf.update({k: str(v) for k, v in stream.settings.SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS.items()})
    return conf


#: what librdkafka can do of Java's SSL_PROTOCOL values: it negotiates TLS 1.2 or 1.3 with the broker
_TLS_VERSIONS = ("TLS", "TLSv1.2", "TLSv1.3")


def _tls_config(stream: StreamConfig) -> dict[str, str]:
    """librdkafka's TLS settings from a stream's ``SSL_*`` keys: stores of any type Dagger takes (JKS, PKCS12,
    PEM) read once here and handed over as PEM text (:mod:`dagger.kafka.tls`)."""

    s, table = stream.settings, stream.INPUT_SCHEMA_TABLE
    key = f"STREAMS[{table}].SOURCE_KAFKA_CONSUMER_CONFIG_"
    conf: dict[str, str] = {}
    if s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL and s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL not in _TLS_VERSIONS:
        raise DaggerConfigError(
            f"{key}SSL_PROTOCOL: {s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL} is refused by librdkafka (it speaks "
            f"TLS 1.2 and 1.3 only); accepted: {', '.join(_TLS_VERSIONS)}, or leave the key out"
        )
    keystore = s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION
    if keystore:
        kind = store_type(keystore, s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_TYPE)
        if kind == "PEM":  # a file with the certificate and its key
            conf["ssl.certificate.location"] = keystore
            conf["ssl.key.location"] = keystore
            if s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD:
                conf["ssl.key.password"] = s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD
        else:
            conf["ssl.certificate.pem"], conf["ssl.key.pem"] = keystore_pem(
                keystore,
                kind,
                s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD,
                s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD,
                f"{key}SSL_KEYSTORE_LOCATION",
            )
    truststore = s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION
    if truststore:
        conf["ssl.ca.pem"] = truststore_pem(
            truststore,
            store_type(truststore, s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE),
            s.SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD,
            f"{key}SSL_TRUSTSTORE_LOCATION",
        )
    return conf
