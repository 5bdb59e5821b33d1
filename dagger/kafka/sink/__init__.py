"""``SINK_TYPE=kafka``: rows encoded as protobuf, JSON or Avro and produced in batches with librdkafka.

* Value: ``SINK_KAFKA_PROTO_MESSAGE``, columns mapped to fields by name (see
  :class:`~dagger.serde.encode.ProtoEncoder`), or a JSON object or an Avro record per row
  (``SINK_KAFKA_DATA_TYPE``); optional key: ``SINK_KAFKA_PROTO_KEY`` built from the same row, or the
  ``SINK_KAFKA_KEY_*`` keys' (:mod:`dagger.kafka.sink.records` encodes each part).
* Delivery is at-least-once, as Dagger's: every produced record is acknowledged before the micro-batch
  commits; a delivery error fails the micro-batch with the broker's reason, and a restart re-runs it
  (records of a failed batch may be written twice; a cleanly stopped job writes each record once).

One module (~420 lines) because it is one sink: its keys (half the module, each with its description), the writer
and the sink; the records' encoding is :mod:`dagger.kafka.sink.records`'.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any, ClassVar, Literal

import pyarrow as pa
from pydantic import Field, model_validator

from dagger.config.model import Json
from dagger.errors import SinkError
from dagger.kafka.client import client_config
from dagger.kafka.refusals import BrokerErrors, refusal_kind
from dagger.kafka.sink.readback import canonical, read_back
from dagger.kafka.sink.records import KEYS, RecordPart, writer
from dagger.kafka.sink.spark import start_query
from dagger.librdkafka_logs import quiet
from dagger.plugins.sink import Sink, SinkEnv, SinkSettings, SinkWriter
from dagger.sinks.capture import SpoolProducer, read_spool
from dagger.sinks.rejected import RejectedRows, isolate


class KafkaSinkSettings(SinkSettings):
    """Kafka: rows encoded as protobuf (or JSON objects) and produced in batches with librdkafka."""

    supports_real_time: ClassVar[bool] = True  # Spark's own Kafka sink writes it
    ignored_keys: ClassVar[dict[str, str]] = {
        "SINK_KAFKA_STREAM": "a name for Dagger's telemetry tags; metrics here name a sink by `SINK_NAME`",
    }

    SINK_KAFKA_BROKERS: str | None = Field(None, description="Bootstrap servers of the output cluster.")
    SINK_KAFKA_TOPIC: str | None = Field(None, description="Output topic.")
    SINK_KAFKA_PROTO_MESSAGE: str | None = Field(None, description="Output value message (fully qualified name).")
    SINK_KAFKA_PROTO_KEY: str | None = Field(None, description="Output key message; no key when unset.")
    SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS: str | None = Field(
        None,
        description="Depot's name for the key message: the record keys are encoded with it when "
        "`SINK_KAFKA_PROTO_KEY` is unset.",
    )
    SINK_KAFKA_STREAM: str | None = Field(
        None, description="Logical output cluster name (Dagger's telemetry tag; accepted and ignored)."
    )
    SINK_KAFKA_DATA_TYPE: str = Field(
        "PROTO",
        description="PROTO, JSON (one object per row), or beyond Dagger AVRO (encoded by Spark's `to_avro`); or a "
        "registered format that writes (`dagger.formats`).",
    )
    SINK_KAFKA_WIRE_FORMAT: Literal["plain", "confluent"] = Field(
        "plain",
        description="Beyond Dagger: `confluent` writes Confluent's wire format (magic byte 0, the 4-byte schema id, "
        "for protobuf the message-index path, then the record) with the schema in the registry at "
        "`SCHEMA_REGISTRY_CONFLUENT_URL`, for all three data types; `plain` writes bare records.",
    )
    SINK_KAFKA_SCHEMA_SUBJECT: str | None = Field(
        None, description="The registry subject of the records written; by default `<SINK_KAFKA_TOPIC>-value`."
    )
    SINK_KAFKA_SCHEMA_AUTO_REGISTER: bool = Field(
        False,
        description="`false` (the default): the subject's latest schema is looked up when the job starts (AVRO: "
        "`dagger validate` and the start check that the output fits it, names and types; PROTO: it must hold "
        "`SINK_KAFKA_PROTO_MESSAGE`; JSON: it shapes the objects as `SINK_KAFKA_JSON_SCHEMA` would). `true`: a "
        "schema is registered at start: AVRO, derived from the output columns (a nullable column becomes "
        '`["null", T]` with default `null`), a record named `SINK_KAFKA_AVRO_RECORD_NAME`; PROTO, the file of '
        "`SINK_KAFKA_PROTO_MESSAGE` (its imports under their own subjects); JSON, `SINK_KAFKA_JSON_SCHEMA` or a "
        "JSON Schema of the output columns.",
    )
    SINK_KAFKA_AVRO_RECORD_NAME: str = Field(
        "dagger.Record", description="The derived Avro record's full name (`namespace.Name`)."
    )
    SINK_KAFKA_AVRO_SCHEMA: str | None = Field(
        None,
        description="With AVRO and `plain`: the records' Avro schema (JSON, or a path or URL of it), checked "
        "against the output as a registered one is; derived from the output columns when unset.",
    )
    SINK_KAFKA_JSON_SCHEMA: str | None = Field(
        None,
        description="With `SINK_KAFKA_DATA_TYPE=JSON`: the JSON Schema of the records written, as Dagger's "
        "JsonRowSerializationSchema takes it. Each object then has exactly the schema's top-level properties, in "
        "its order, each value converted to the property's type (`integer`, `number`, `string`, `boolean`, "
        "`date-time`, objects and arrays); a value that does not convert rejects its row (to the dead-letter output, "
        "or failing the batch when `INVALID_MESSAGE_ERROR` is in `SINK_ERROR_TYPES_FOR_FAILURE`). Properties are matched to output columns by name, or — as in Dagger — by "
        "position when the names differ and the counts are equal. Without it every output column is written.",
    )
    SINK_KAFKA_KEY_COLUMNS: str | None = Field(
        None,
        description="Beyond Dagger, as Flink's `key.fields`: the output columns (comma-separated) each record's key "
        "is made of, encoded as `SINK_KAFKA_KEY_DATA_TYPE` says; the value still holds every column. Needed for a "
        "JSON or Avro key whose schema is derived; a looked-up or given key schema names its columns itself.",
    )
    SINK_KAFKA_KEY_DATA_TYPE: str | None = Field(
        None,
        description="The keys' data type; by default PROTO when `SINK_KAFKA_PROTO_KEY` names the key message, "
        "otherwise the value's `SINK_KAFKA_DATA_TYPE` when `SINK_KAFKA_KEY_COLUMNS` is set. No key is written "
        "when none of the three is set.",
    )
    SINK_KAFKA_KEY_WIRE_FORMAT: Literal["plain", "confluent"] | None = Field(
        None, description="The keys' wire format, as `SINK_KAFKA_WIRE_FORMAT` (its value by default)."
    )
    SINK_KAFKA_KEY_SCHEMA_SUBJECT: str | None = Field(
        None, description="The registry subject of the keys written; by default `<SINK_KAFKA_TOPIC>-key`."
    )
    SINK_KAFKA_KEY_SCHEMA_AUTO_REGISTER: bool | None = Field(
        None,
        description="As `SINK_KAFKA_SCHEMA_AUTO_REGISTER`, for the keys' schema (its value by default): `true` "
        "registers one derived from `SINK_KAFKA_KEY_COLUMNS` (or the file of `SINK_KAFKA_PROTO_KEY`).",
    )
    SINK_KAFKA_KEY_AVRO_RECORD_NAME: str = Field(
        "dagger.Key", description="The derived Avro key record's full name (`namespace.Name`)."
    )
    SINK_KAFKA_KEY_AVRO_SCHEMA: str | None = Field(
        None,
        description="With an AVRO key and `plain`: the keys' Avro schema (JSON, or a path or URL of it); its "
        "fields name the key's columns.",
    )
    SINK_KAFKA_KEY_JSON_SCHEMA: str | None = Field(
        None, description="With a JSON key: the keys' JSON Schema, as `SINK_KAFKA_JSON_SCHEMA` shapes the values."
    )
    SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE: bool = Field(
        False, description="Allow 20 MiB messages and compress with snappy."
    )
    SINK_KAFKA_LINGER_MS: int = Field(0, ge=0, description="Producer `linger.ms`.")
    SINK_KAFKA_PRODUCER_CONFIG: Annotated[dict[str, str], Json] = Field(
        default_factory=dict, description="Extra librdkafka producer properties."
    )

    @property
    def large_messages(self) -> bool:
        return self.SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE

    @property
    def needs_registry(self) -> bool:
        return self.registry("value")[0] or (self.writes_keys and self.registry("key")[0])

    @model_validator(mode="after")
    def _required(self) -> KafkaSinkSettings:
        self.require("kafka", "SINK_KAFKA_BROKERS", "SINK_KAFKA_TOPIC")
        self.require("kafka", *(KEYS["value"][what] for what in writer(self.SINK_KAFKA_DATA_TYPE).required_part_keys))
        if self.SINK_KAFKA_KEY_DATA_TYPE is not None:
            writer(self.SINK_KAFKA_KEY_DATA_TYPE, "SINK_KAFKA_KEY_DATA_TYPE")
        named = {self.SINK_KAFKA_PROTO_KEY, self.SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS} - {None, ""}
        if len(named) > 1:
            raise ValueError(
                f"SINK_KAFKA_PROTO_KEY ({self.SINK_KAFKA_PROTO_KEY}) and SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS "
                f"({self.SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS}) name different key messages; keep one"
            )
        return self

    def registry(self, part: str) -> tuple[bool, bool, str, str]:
        """``(confluent, auto_register, subject, the key naming the subject)`` of ``part`` (value or key), the
        key's defaults taken from the value's."""
        if part == "value":
            wire, auto, given = (
                self.SINK_KAFKA_WIRE_FORMAT,
                self.SINK_KAFKA_SCHEMA_AUTO_REGISTER,
                "SINK_KAFKA_SCHEMA_SUBJECT",
            )
        else:
            wire = self.SINK_KAFKA_KEY_WIRE_FORMAT or self.SINK_KAFKA_WIRE_FORMAT
            auto = self.SINK_KAFKA_KEY_SCHEMA_AUTO_REGISTER
            auto = self.SINK_KAFKA_SCHEMA_AUTO_REGISTER if auto is None else auto
            given = "SINK_KAFKA_KEY_SCHEMA_SUBJECT"
        if getattr(self, given):
            return wire == "confluent", auto, getattr(self, given), given
        return (
            wire == "confluent",
            auto,
            f"{self.SINK_KAFKA_TOPIC}-{part}",
            f"SINK_KAFKA_TOPIC (subject <topic>-{part})",
        )

    def output_message(self) -> str | None:
        if writer(self.SINK_KAFKA_DATA_TYPE).writes_messages and self.SINK_KAFKA_PROTO_MESSAGE:
            return self.SINK_KAFKA_PROTO_MESSAGE
        return None

    def output_topic(self) -> str | None:
        return self.SINK_KAFKA_TOPIC

    def written_message(self) -> str | None:
        return self.SINK_KAFKA_PROTO_MESSAGE

    def part_message(self, part: str) -> str | None:
        """The message a ``part`` (value or key) names: a key's also by Depot's key."""
        if part == "value":
            return self.SINK_KAFKA_PROTO_MESSAGE
        return self.SINK_KAFKA_PROTO_KEY or self.SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS

    @property
    def key_data_type(self) -> str | None:
        """The data type of the keys (None: no key): ``SINK_KAFKA_KEY_DATA_TYPE``; else, as Dagger, PROTO when a key
        message is named; else the value's."""
        if not self.writes_keys:
            return None
        return self.SINK_KAFKA_KEY_DATA_TYPE or ("PROTO" if self.part_message("key") else self.SINK_KAFKA_DATA_TYPE)

    def registry_subjects(self) -> list[tuple[str, str]]:
        """The registry subjects the sink looks its schemas up in when the job starts, each with the key that
        names it (none with auto-register or the plain format)."""
        out = []
        for part in ("value", "key") if self.writes_keys else ("value",):
            confluent, auto, subject, where = self.registry(part)
            if confluent and not auto:
                out.append((subject, where))
        return out

    @property
    def writes_keys(self) -> bool:
        return bool(
            self.SINK_KAFKA_PROTO_KEY
            or self.SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS
            or self.SINK_KAFKA_KEY_COLUMNS
            or self.SINK_KAFKA_KEY_DATA_TYPE
        )


class _KafkaWriter(SinkWriter):
    def __init__(self, sink: KafkaSink, partition_id: int, batch_id: int):
        from dagger.kafka.producer import ProduceError, open_producer  # start-up: loads numpy

        self.sink = sink
        self.rejected = RejectedRows(sink, batch_id, partition_id)
        if sink.capture is not None:  # dagger test: kept, not sent (dagger.sinks.capture)
            self.producer = SpoolProducer(sink.capture, batch_id, partition_id)
            self.count = 0
            return
        try:
            self.producer = open_producer(sink.producer_config, sink.topic)
        except ProduceError as exc:
            raise SinkError(
                f"SINK_KAFKA_TOPIC {sink.topic}: librdkafka rejected the producer settings: {exc} "
                "(check SINK_KAFKA_PRODUCER_CONFIG and SINK_KAFKA_BROKERS)"
            ) from None
        self.count = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            isolate(batch, self._produce, self.rejected)

    def _encode(self, batch: pa.RecordBatch) -> tuple[pa.BinaryArray, pa.BinaryArray | None]:
        sink = self.sink
        values = sink.value.encode(batch, sink.jvm_column("value"))
        keys = sink.key.encode(batch, sink.jvm_column("key")) if sink.key is not None else None
        return values, keys

    def _produce(self, batch: pa.RecordBatch) -> None:
        from dagger.kafka.producer import ProduceError  # start-up: loads numpy

        values, keys = self._encode(batch)
        try:
            self.producer.produce(values, keys)
        except ProduceError as exc:
            raise SinkError(f"SINK_KAFKA_TOPIC {self.sink.topic}: cannot produce: {exc}") from None
        self.count += len(values)

    def abort(self) -> None:
        self.rejected.abort()
        self.producer.close(0)  # queued records are dropped, not delivered after the failure

    def flush(self) -> int:
        # librdkafka retries each record (with back-off) until message.timeout.ms, then reports it failed
        remaining = self.producer.flush(int(self.sink.producer_config.get("message.timeout.ms", 300_000)) / 1000 + 10)
        failed, reason = self.producer.take_failed()
        self.producer.close(0)  # flushed above: do not wait again for what timed out
        if failed or remaining:
            raise SinkError(
                f"SINK_KAFKA_TOPIC {self.sink.topic}: {failed or remaining} record(s) were not delivered "
                f"to {self.sink.producer_config.get('bootstrap.servers')}: {reason or 'flush timed out'}"
            )
        self.sink.count("written", self.count)
        self.rejected.flush()
        return self.count


class KafkaSink(Sink):
    """Protobuf, JSON or Avro records to ``SINK_KAFKA_TOPIC``."""

    name = "kafka"
    rerun = "duplicates: its records are produced again (the Kafka sink is at-least-once; with a record key and a compacted topic, readers keep one record per key)"

    registry: dict[str, Any] | None = None  # a ConfluentSettings' fields (SinkEnv.registry)

    def __init__(
        self,
        topic: str,
        producer_config: dict[str, str | bool],
        value: RecordPart | None = None,
        key: RecordPart | None = None,
        data_type: str = "PROTO",
    ):
        self.topic = topic
        self.producer_config = producer_config
        self.value = value if value is not None else RecordPart("value", data_type, False)
        self.key = key

    @classmethod
    def from_settings(cls, config: KafkaSinkSettings, env: SinkEnv) -> KafkaSink:
        producer = client_config(config, "producer")
        value = RecordPart.of(config, "value", env.descriptors)
        key = RecordPart.of(config, "key", env.descriptors)
        sink = cls(config.SINK_KAFKA_TOPIC, producer, value, key)
        for part in sink.parts:
            part.jvm_protobuf = part.jvm_protobuf and env.jvm_codecs
        if config.needs_registry:
            sink.registry = env.registry
        return sink

    @property
    def parts(self) -> list[RecordPart]:
        return [self.value] if self.key is None else [self.value, self.key]

    def explain_failure(self, message: str) -> str | None:
        """Spark's Kafka sink (the Java client) gave up on this sink's records: the delivery timeout passed
        (``message.timeout.ms``), or the topic's metadata never came within it."""
        if "org.apache.kafka.common.errors.TimeoutException" not in message or self.topic not in message:
            return None
        reason = message.split("org.apache.kafka.common.errors.TimeoutException:", 1)[-1].strip()
        timeout = self.producer_config.get("message.timeout.ms", 300_000)
        return (
            f"SinkError: SINK_KAFKA_TOPIC {self.topic}: records were not delivered to "
            f"{self.producer_config.get('bootstrap.servers')} within message.timeout.ms ({timeout} ms): {reason}"
        )

    def jvm_columns(self, schema: Any) -> dict[str, Any]:
        """The values and keys encoded in the JVM: AVRO by Spark's ``to_avro``, PROTO by Dagger's protobuf encoder
        (``SPARK_PROTOBUF_CODEC=jvm``)."""
        columns = {self.jvm_column(part.part): part.jvm_column(schema) for part in self.parts}
        return {name: column for name, column in columns.items() if column is not None}

    def written_records(self, capture: str) -> list[dict[str, Any]]:
        return read_back(self.value, [value for value, _ in read_spool(capture)])

    def expected_record(self, record: dict[str, Any], partial: bool) -> dict[str, Any]:
        return record if partial else canonical(self.value, record)  # written and read back as the sink's are

    def describe(self) -> str:
        key = f" (key {self.key.describe()})" if self.key is not None else ""
        return (
            f"kafka topic {self.topic} on {self.producer_config['bootstrap.servers']} as {self.value.describe()}{key}"
        )

    def check(self, schema: pa.Schema) -> list[str]:
        problems = self.key.check(schema) if self.key is not None else []
        key_columns = self.key.columns or () if self.key is not None else ()
        return self.value.check(schema, key_columns) + problems

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _KafkaWriter(self, partition_id, batch_id)

    def prepare(self) -> None:
        """Auto-register: each part's schema is registered under its subject (its id goes in the header); a
        captured sink (``dagger test``) registers nothing."""
        for part in self.parts:
            part.prepare(self.registry or {}, offline=self.capture is not None)

    def reach(self) -> None:
        """At start, on the driver: the brokers must answer within :attr:`first_contact_s` and must not refuse the
        sink's login or TLS handshake. Either ends the job with its reason (a producer would retry until
        ``message.timeout.ms``, five minutes by default); an outage once the job ran is left to the producers'
        retries."""

        from confluent_kafka import KafkaException, Producer

        from dagger.kafka.producer import PYTHON_CLIENT_ONLY  # start-up: loads numpy

        errors = BrokerErrors()
        config = {k: v for k, v in self.producer_config.items() if k not in PYTHON_CLIENT_ONLY}
        producer = Producer(quiet({**config, "error_cb": errors}))
        deadline = time.monotonic() + self.first_contact_s
        answered, last = False, ""
        while time.monotonic() < deadline and not errors.refused:
            try:
                producer.list_topics(timeout=max(0.2, min(1.0, deadline - time.monotonic())))
                answered = True
                break
            except KafkaException as exc:
                last = exc.args[0].str()
                producer.poll(0)  # hands the error callbacks over
        producer.poll(0)
        if errors.refused:
            hint = (
                "sasl.username and sasl.password (and sasl.mechanism)"
                if refusal_kind(errors.refused) == "login"
                else "ssl.ca.location and the ssl.* settings"
            )
            raise SinkError(
                f"SINK_KAFKA_BROKERS {self.producer_config.get('bootstrap.servers')}: the brokers refused the "
                f"sink's connection: {errors.refused} (check SINK_KAFKA_PRODUCER_CONFIG's {hint})"
            )
        if not answered:
            raise SinkError(
                f"sink '{self.display_name}': no broker of SINK_KAFKA_BROKERS "
                f"{self.producer_config.get('bootstrap.servers')} answered in {self.first_contact_s:.0f} s "
                f"(SPARK_FIRST_CONTACT_TIMEOUT_MS): {errors.last or last or 'no answer'} (check SINK_KAFKA_BROKERS; "
                "raise "
                "SPARK_FIRST_CONTACT_TIMEOUT_MS when the brokers start after the job)"
            )

    def commit(self, results: list[Any], batch_id: int) -> None:
        logging.getLogger(__name__).info(
            "batch %d: %d record(s) written to %s", batch_id, sum(r or 0 for r in results), self.topic
        )

    #: Spark's Kafka sink, the rows encoded in the JVM (:meth:`dagger.plugins.sink.Sink.start_spark_query`)
    start_spark_query = start_query
