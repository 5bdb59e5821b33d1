"""Every Kafka client Dagger opens takes its settings from here, from the keys users write:
:func:`client_config` ``(settings, role)``, for each role a client plays.

===================  ==========================================  ==================================================
role                 settings                                    the client
===================  ==========================================  ==================================================
``consumer``         a stream's (``SOURCE_KAFKA_CONSUMER_*``)    Dagger's reader, its group commits (librdkafka)
``spark_consumer``   a stream's                                  Spark's Kafka source (the Java client)
``producer``         the Kafka sink's (``SINK_KAFKA_*``)         Dagger's writer (librdkafka)
``spark_producer``   the Kafka sink's                            Spark's Kafka sink (the Java client)
``dead_letters``     the job's (``DEAD_LETTER_KAFKA_*``)         the dead-letter producer (librdkafka)
``stream_dead_...``  a stream's (``SOURCE_KAFKA_DEAD_LETTER_*``)  a stream's own dead-letter producer (librdkafka)
``stream_producer``  a stream's                                  ``dagger generate --config`` (librdkafka)
===================  ==========================================  ==================================================

Dagger's keys are the Java client's names. For librdkafka, SASL's JAAS line becomes a username and password and
Java key and trust stores (JKS, PKCS12, PEM) are read once, here, into PEM text (:mod:`dagger.kafka.tls`): the
executors need no copy of the files. ``SINK_KAFKA_PRODUCER_CONFIG`` is in librdkafka's names; for the Java client it
is translated (:mod:`dagger.kafka.java_client`). Runs on the driver; the settings travel to the executors in the
reader's and writer's specs.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from dagger.errors import DaggerConfigError
from dagger.kafka.java_client import producer_options
from dagger.kafka.tls import keystore_pem, store_type, truststore_pem

Role = Literal[
    "consumer", "spark_consumer", "producer", "spark_producer", "dead_letters", "stream_dead_letters", "stream_producer"
]
#: the settings a producer shares with its cluster's consumers: the connection's security
SECURITY = ("security.", "sasl.", "ssl.")


def client_config(
    settings: Any,
    role: Role,
    *,
    table: str = "",
    job_slug: str = "",
    large_messages: bool = False,
    known: set[str] | None = None,
) -> dict[str, Any]:
    """The settings of the Kafka client that plays ``role``, from ``settings`` (see the table above).

    ``table`` and ``job_slug``: a stream's table and the job's slug (a stream's default group, and errors name
    ``STREAMS[table]``). ``large_messages``: ``SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE``. ``known``: the Java
    producer's setting names, when a Spark session can say (``spark_producer`` refuses a setting neither client has).
    ``stream_dead_letters`` writes to a stream's own dead-letter topic, on the stream's cluster
    (``SOURCE_KAFKA_DEAD_LETTER_BROKERS``, else the stream's brokers) with the stream's security settings;
    ``stream_producer`` writes to the stream's own topics, with the same settings.
    """
    if role == "consumer":
        return _consumer(settings, table, job_slug, large_messages)
    if role == "spark_consumer":
        return _java_consumer(settings)
    if role == "producer":
        return _producer(settings)
    if role == "spark_producer":
        return _java_producer(settings, known)
    if role == "dead_letters":
        producer = {"bootstrap.servers": settings.DEAD_LETTER_KAFKA_BROKERS}
        producer.update({k: str(v) for k, v in settings.DEAD_LETTER_KAFKA_PRODUCER_CONFIG.items()})
        return producer
    if role in ("stream_producer", "stream_dead_letters"):
        consumer = _consumer(settings, table, job_slug, large_messages)
        producer = {k: v for k, v in consumer.items() if k.startswith(SECURITY)}
        dead_letters = settings.SOURCE_KAFKA_DEAD_LETTER_BROKERS if role == "stream_dead_letters" else None
        producer["bootstrap.servers"] = dead_letters or consumer["bootstrap.servers"]
        return producer
    raise ValueError(f"no Kafka client plays {role!r}; the roles: {', '.join(Role.__args__)}")


def _producer(settings: Any) -> dict[str, Any]:
    """librdkafka producer settings of the Kafka sink: its keys' (``SINK_KAFKA_LINGER_MS``, large messages), then
    ``SINK_KAFKA_PRODUCER_CONFIG`` as given."""
    producer: dict[str, Any] = {
        "bootstrap.servers": settings.SINK_KAFKA_BROKERS,
        "linger.ms": str(settings.SINK_KAFKA_LINGER_MS),
        "queue.buffering.max.messages": "1000000",
        "queue.buffering.max.kbytes": "1048576",
        "batch.num.messages": "10000",
        "delivery.report.only.error": "true",  # no Python callback per delivered record
    }
    if settings.SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE:
        producer.update({"message.max.bytes": "20971520", "compression.type": "snappy"})
    producer.update({k: str(v) for k, v in settings.SINK_KAFKA_PRODUCER_CONFIG.items()})
    # confluent-kafka reads this one key itself, as a bool
    producer["delivery.report.only.error"] = producer["delivery.report.only.error"].lower() == "true"
    return producer


def _java_producer(settings: Any, known: set[str] | None) -> dict[str, str]:
    """The Kafka sink's producer settings for the Java client: its keys' (``SINK_KAFKA_LINGER_MS``, large messages),
    then ``SINK_KAFKA_PRODUCER_CONFIG`` translated from librdkafka's names."""
    # batches of up to 1 MB per partition, as librdkafka's (the micro-batch writer's) default; the Java client's is 16 KB
    options = {"linger.ms": str(settings.SINK_KAFKA_LINGER_MS), "batch.size": "1000000"}
    if settings.SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE:
        options.update({"max.request.size": "20971520", "compression.type": "snappy"})
    options.update(producer_options(settings.SINK_KAFKA_PRODUCER_CONFIG, "SINK_KAFKA_PRODUCER_CONFIG", known))
    return options


def _java_consumer(settings: Any) -> dict[str, str]:
    """A stream's security settings and additional configurations, in the Java client's names (Dagger's keys'
    own): what Spark's Kafka source takes as ``kafka.<setting>`` beside its brokers."""
    options = {"bootstrap.servers": settings.SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS}
    prefix = "SOURCE_KAFKA_CONSUMER_CONFIG_"
    for key in sorted(type(settings).model_fields):
        value = getattr(settings, key)
        if not key.startswith(prefix) or value in (None, ""):
            continue
        name = key[len(prefix) :].lower().replace("_", ".")
        if name.startswith(SECURITY):
            options[name] = str(value)
    options.update({k: str(v) for k, v in settings.SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS.items()})
    return options


_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def _consumer(settings: Any, table: str, job_slug: str, large_messages: bool) -> dict[str, str]:
    """librdkafka consumer settings from a stream's ``SOURCE_KAFKA_CONSUMER_CONFIG_*`` keys."""
    conf: dict[str, str] = {
        "bootstrap.servers": settings.SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS,
        "group.id": settings.SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID or f"dagger-{job_slug}-{table}",
        "auto.offset.reset": settings.SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET,
        # librdkafka's reconnect backoff grows to 10 s during an outage, so a job went on up to 10 s after its
        # brokers were back (and a request in that time said they did not answer, a second time); 1 s here
        "reconnect.backoff.max.ms": "1000",
    }
    if settings.SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL:
        conf["security.protocol"] = settings.SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL
    if settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM:
        conf["sasl.mechanism"] = settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM
    if settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG:
        found = dict(_JAAS.findall(settings.SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG))
        if "username" not in found or "password" not in found:
            raise DaggerConfigError(
                f"STREAMS[{table}].SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG must contain "
                'username="..." and password="..." (e.g. org.apache.kafka.common.security.plain.PlainLoginModule '
                'required username="u" password="p";)'
            )
        conf["sasl.username"] = found["username"]
        conf["sasl.password"] = found["password"]
    conf.update(_tls_config(settings, table))
    if large_messages:
        conf["max.partition.fetch.bytes"] = "5242880"
    conf.update({k: str(v) for k, v in settings.SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS.items()})
    return conf


#: what librdkafka can do of Java's SSL_PROTOCOL values: it negotiates TLS 1.2 or 1.3 with the broker
_TLS_VERSIONS = ("TLS", "TLSv1.2", "TLSv1.3")


def _tls_config(s: Any, table: str) -> dict[str, str]:
    """librdkafka's TLS settings from a stream's ``SSL_*`` keys: stores of any type Dagger takes (JKS, PKCS12,
    PEM) read once here and handed over as PEM text (:mod:`dagger.kafka.tls`)."""

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
