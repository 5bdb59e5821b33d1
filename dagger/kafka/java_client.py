"""Kafka client settings in librdkafka's names (``SINK_KAFKA_PRODUCER_CONFIG``, which the micro-batch sink hands to
librdkafka) as the Java client names them, for Spark's Kafka sink in real-time mode.

Most settings have the same name in both clients. Those that do not are translated: SASL's username and password
become a JAAS line of the mechanism's login module; a PEM CA file, client certificate and key become the Java
client's PEM trust and key stores, read once, here; a PKCS#12 key store keeps its file; the rest map name for name
(:data:`RENAMED`). librdkafka's queue knobs with no Java counterpart are left out, with a log line; a setting that
has no counterpart and changes what is sent or how (:data:`REFUSED`) is an error naming it.

Runs on the driver, when the query is planned (and by ``dagger validate``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from dagger.errors import DaggerConfigError

log = logging.getLogger("dagger")

#: librdkafka's name → the Java client's, where only the name differs
RENAMED = {
    "metadata.broker.list": "bootstrap.servers",
    "sasl.mechanisms": "sasl.mechanism",
    "request.required.acks": "acks",
    "queue.buffering.max.ms": "linger.ms",
    "compression.codec": "compression.type",
    "message.max.bytes": "max.request.size",
    "message.timeout.ms": "delivery.timeout.ms",
    "message.send.max.retries": "retries",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
}
#: librdkafka's queue and callback knobs: the Java client sizes its batches by bytes (batch.size, buffer.memory)
LEFT_OUT = {
    "batch.num.messages": "the Java client sizes its batches by bytes (batch.size)",
    "queue.buffering.max.messages": "the Java client bounds its queue by bytes (buffer.memory)",
    "delivery.report.only.error": "delivery reports are librdkafka's (the Java client acknowledges each batch)",
    "socket.timeout.ms": "the Java client's request.timeout.ms covers it",
    "statistics.interval.ms": "librdkafka's statistics callback",
    "log_level": "librdkafka's logging",
    "debug": "librdkafka's debug contexts",
}
#: settings with no Java counterpart that change what is sent or how it is secured: refused, not dropped
REFUSED = {
    "enable.ssl.certificate.verification": "the Java client always verifies the brokers' certificates; give it the "
    "CA that signed them (ssl.ca.location)",
    "ssl.cipher.suites": "cipher names differ between OpenSSL and the JVM: set ssl.cipher.suites in Java's names "
    "(SSL_CONF's ssl.cipher.suites is not translated)",
    "ssl.curves.list": "OpenSSL's curve list has no Java client setting",
    "sasl.kerberos.kinit.cmd": "the Java client logs in to Kerberos through JAAS (sasl.jaas.config), not kinit",
    "sasl.oauthbearer.config": "the Java client's OAUTHBEARER needs a login callback handler (sasl.jaas.config and "
    "sasl.login.callback.handler.class)",
}
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def producer_options(config: dict[str, Any], key: str, known: set[str] | None = None) -> dict[str, str]:
    """``config`` (librdkafka's names) as the Java client's producer settings; ``key`` names the config key in
    errors; ``known`` (the Java producer's setting names, when a session can say) refuses a setting neither client
    has."""
    given = {k: str(v) for k, v in config.items()}
    out: dict[str, str] = {}
    username, password = given.pop("sasl.username", None), given.pop("sasl.password", None)
    ca = _pem(given.pop("ssl.ca.location", None), f"{key}: ssl.ca.location") or given.pop("ssl.ca.pem", None)
    cert = _pem(given.pop("ssl.certificate.location", None), f"{key}: ssl.certificate.location")
    cert = cert or given.pop("ssl.certificate.pem", None)
    private = _pem(given.pop("ssl.key.location", None), f"{key}: ssl.key.location") or given.pop("ssl.key.pem", None)
    key_password = given.pop("ssl.key.password", None)
    for name, value in sorted(given.items()):
        if name in REFUSED:
            raise DaggerConfigError(
                f"{key}: {name} has no counterpart in the Java client that real-time mode writes with (Spark's Kafka "
                f"sink): {REFUSED[name]}"
            )
        if name in LEFT_OUT:
            log.info("%s: %s is left out in real-time mode: %s", key, name, LEFT_OUT[name])
            continue
        if name == "ssl.endpoint.identification.algorithm":
            out[name] = "" if value.lower() == "none" else value
        elif name == "queue.buffering.max.kbytes":
            out["buffer.memory"] = str(int(value) * 1024)
        elif name == "ssl.keystore.location":  # librdkafka's key store is PKCS#12
            out[name] = value
            out.setdefault("ssl.keystore.type", "PKCS12")
        else:
            translated = RENAMED.get(name, name)
            if known is not None and translated not in known:
                raise DaggerConfigError(
                    f"{key}: {name} is a setting of neither librdkafka that the micro-batch sink understands nor the "
                    "Java client real-time mode writes with"
                )
            out[translated] = value
    if username is not None or password is not None:
        mechanism = (out.get("sasl.mechanism") or "PLAIN").upper()
        if mechanism not in _LOGIN_MODULES:
            raise DaggerConfigError(
                f"{key}: sasl.username and sasl.password with sasl.mechanism {mechanism}: real-time mode makes a "
                f"JAAS login for {', '.join(_LOGIN_MODULES)}; give sasl.jaas.config in the Java client's form instead"
            )
        out["sasl.mechanism"] = mechanism
        out.setdefault(
            "sasl.jaas.config",
            f'{_LOGIN_MODULES[mechanism]} required username="{_quoted(username or "")}" '
            f'password="{_quoted(password or "")}";',
        )
    if ca:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.certificates"] = ca
    if cert or private:
        if not (cert and private):
            raise DaggerConfigError(
                f"{key}: a client certificate needs both ssl.certificate.location and ssl.key.location (or the "
                "*.pem forms)"
            )
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = cert
        out["ssl.keystore.key"] = private
        if key_password:
            out["ssl.key.password"] = key_password
    elif key_password:
        out["ssl.key.password"] = key_password
    return out


#: the Java producer's request.timeout.ms and max.block.ms when none is given
JAVA_REQUEST_TIMEOUT_MS, JAVA_MAX_BLOCK_MS = 30_000, 60_000


def fit_delivery_timeout(producer: dict[str, str], key: str) -> dict[str, str]:
    """``producer`` (the Java client's names) with a request timeout that fits in its delivery timeout: librdkafka's
    ``message.timeout.ms`` bounds a record's whole delivery whatever one request waits, while the Java client
    refuses to start (``Failed to construct kafka producer``) when ``delivery.timeout.ms`` is below ``linger.ms`` +
    ``request.timeout.ms`` (30 s by default), and its ``send`` waits up to ``max.block.ms`` (60 s) for the topic's
    metadata, which librdkafka counts in the delivery timeout. A request timeout given too long for it is an error
    naming both."""
    if "delivery.timeout.ms" not in producer:
        return producer
    delivery, linger = int(producer["delivery.timeout.ms"]), int(producer.get("linger.ms", "5"))
    producer = dict(producer)
    if "max.block.ms" not in producer and delivery < JAVA_MAX_BLOCK_MS:  # librdkafka's timeout counts the wait for
        producer["max.block.ms"] = str(delivery)  # the topic's metadata too; the Java client's send() blocks 60 s
    request = producer.get("request.timeout.ms")
    if request is None:
        if delivery - linger < JAVA_REQUEST_TIMEOUT_MS:
            producer["request.timeout.ms"] = str(max(1, delivery - linger))
        return producer
    if int(request) + linger > delivery:
        raise DaggerConfigError(
            f"{key}: message.timeout.ms {delivery} is shorter than request.timeout.ms {request} plus the linger of "
            f"{linger} ms, which Spark's Kafka sink (the Java client) refuses: give a request.timeout.ms of at most "
            f"{delivery - linger}, or leave it out"
        )
    return producer


def java_producer_settings(spark: Any) -> set[str]:
    """The Java producer's setting names, from the kafka-clients on the session's class path."""
    names = spark._jvm.org.apache.kafka.clients.producer.ProducerConfig.configNames()
    return {str(n) for n in names}


def _pem(path: str | None, where: str) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise DaggerConfigError(f"{where}: cannot read {path}: {exc.strerror}") from None


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
