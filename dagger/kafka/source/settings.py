"""The keys of a Kafka stream (``SOURCE_NAME`` ``KAFKA_SOURCE`` or ``KAFKA_CONSUMER``), as Dagger names them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from dagger.config.model import Json
from dagger.plugins.source import SourceSettings

StoreType = Literal["JKS", "PKCS12", "PEM"]


class KafkaSourceSettings(SourceSettings):
    """Topics read by the `dagger-kafka` data source: librdkafka's consumer settings, positions and bounds."""

    SOURCE_KAFKA_TOPIC_NAMES: str | None = Field(
        None,
        description="Regular expression matched against whole topic names (`a|b`, `events-.*`). Topics "
        "and partitions that appear while the job runs are picked up.",
    )
    SOURCE_KAFKA_NAME: str | None = Field(
        None, description="Logical cluster name (Dagger's telemetry tag; accepted and ignored)."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS: str | None = Field(
        None, description="Kafka `bootstrap.servers` of this stream."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID: str | None = Field(
        None,
        description="Consumer group. The job starts from this group's committed offsets and commits the "
        "offsets of every finished micro-batch to it, so lag tools see the job. Default: "
        "`dagger-<FLINK_JOB_ID>-<INPUT_SCHEMA_TABLE>`.",
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET: Literal["latest", "earliest"] = Field(
        "latest", description="Where to start when the group has no committed offset."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_COMMIT_ENABLE: bool | None = Field(
        None,
        description="`false`: the stream's offsets are not committed to its consumer group (the checkpoint alone "
        "holds its position; lag tools reading the group do not see the job). Unset or `true`: the offsets of every "
        "finished micro-batch are committed. Dagger committed at each checkpoint whatever this key said (its "
        "consumer ignores the legacy `auto.commit.enable` name it became): remove a `false` kept from a Dagger "
        "config to keep the commits.",
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL: Literal["SASL_PLAINTEXT", "SASL_SSL", "SSL", "PLAINTEXT"] | None = (
        Field(None, description="`security.protocol`.")
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SASL_MECHANISM: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="`sasl.mechanism`."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SASL_JAAS_CONFIG: str | None = Field(
        None,
        description="Java JAAS line; its `username` and `password` become librdkafka's `sasl.username` and "
        "`sasl.password`.",
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_PROTOCOL: (
        Literal["TLS", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv2", "SSLv3"] | None
    ) = Field(
        None,
        description="TLS, TLSv1.2 or TLSv1.3: librdkafka negotiates TLS 1.2 or 1.3 with the broker. The older "
        "versions are refused at start (librdkafka does not speak them).",
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEY_PASSWORD: str | None = Field(
        None, description="Password of the key in the keystore when it differs from the store's (JKS, PEM)."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_LOCATION: str | None = Field(
        None,
        description="Client certificate and key store: JKS (read with the JDK's keytool), PKCS12 or PEM. Read once "
        "at start; executors need no copy.",
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_PASSWORD: str | None = Field(None, description="Keystore password.")
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_KEYSTORE_TYPE: StoreType | None = Field(
        None, description="Keystore format; read from the file when unset."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION: str | None = Field(
        None,
        description="CA certificates the brokers' certificates are checked against: JKS (read with the JDK's "
        "keytool), PKCS12 or PEM. Read once at start; executors need no copy.",
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD: str | None = Field(
        None, description="Truststore password (JKS and PKCS12 stores)."
    )
    SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE: StoreType | None = Field(
        None, description="Truststore format; read from the file when unset."
    )
    SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS: Annotated[dict[str, str], Json] = Field(
        default_factory=dict,
        description="Extra librdkafka consumer properties, passed as they are (as in the GoTo fork).",
    )
    SOURCE_KAFKA_INVALID_RECORD_POLICY: Literal["fail", "drop", "dead-letter"] = Field(
        "fail",
        description="What happens to a record that cannot be decoded: `fail` stops the query with an error "
        "naming topic, partition and offset (Dagger's behaviour); `drop` skips and counts it; `dead-letter` "
        "writes its raw bytes with the reason and coordinates to `SOURCE_KAFKA_DEAD_LETTER_TOPIC`.",
    )
    SOURCE_KAFKA_DEAD_LETTER_TOPIC: str | None = Field(
        None, description="Topic that receives undecodable records under the `dead-letter` policy."
    )
    SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS: int = Field(
        300_000,
        gt=0,
        description="How long a running job waits for the stream's brokers when they stop answering (one log "
        "line, then the job goes on where it was); past it the job fails naming the brokers, and a restart resumes. "
        "Brokers unreachable at start fail the job after 30 s.",
    )
    SOURCE_KAFKA_DEAD_LETTER_BROKERS: str | None = Field(
        None, description="Bootstrap servers of the dead-letter topic. Default: the stream's own."
    )
    SOURCE_KAFKA_STARTING_OFFSETS: str = Field(
        "group",
        description="Where a new job (no checkpoint) starts: `group` (the consumer group's committed offsets, "
        "else `AUTO_OFFSET_RESET`), `earliest`, `latest`, or JSON offsets "
        '`{"topic": {"0": 42, "1": -2}}` (-2 earliest, -1 latest; partitions left out start at earliest).',
    )
    SOURCE_KAFKA_STARTING_TIMESTAMP: str | None = Field(
        None,
        description="Start at the first record at or after this instant (ISO-8601 such as "
        "`2026-11-01T00:00:00Z`, or epoch ms), per partition. Excludes `SOURCE_KAFKA_STARTING_OFFSETS`.",
    )
    SOURCE_KAFKA_ENDING_OFFSETS: str | None = Field(
        None,
        description="Makes the stream bounded: `latest` (the end offsets when the job starts) or JSON offsets "
        "per partition (exclusive). The job then reads its range and exits; see docs/sources.md.",
    )
    SOURCE_KAFKA_ENDING_TIMESTAMP: str | None = Field(
        None,
        description="Makes the stream bounded: stop before the first record at or after this instant "
        "(exclusive). Excludes `SOURCE_KAFKA_ENDING_OFFSETS`.",
    )
