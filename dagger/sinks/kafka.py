"""``SINK_TYPE=kafka``: rows encoded as protobuf (or JSON) and produced in batches with librdkafka.

* Value: ``SINK_KAFKA_PROTO_MESSAGE``, columns mapped to fields by name (see
  :class:`~dagger.serde.encode.ProtoEncoder`); optional key: ``SINK_KAFKA_PROTO_KEY`` built from the same
  row. ``SINK_KAFKA_DATA_TYPE=JSON`` writes one JSON object per row instead (no key).
* Delivery is at-least-once, as Dagger's: every produced record is acknowledged before the micro-batch
  commits; a delivery error fails the micro-batch with the broker's reason, and a restart re-runs it
  (records of a failed batch may be written twice; a cleanly stopped job writes each record once).

One module (~380 lines) because it is one sink: its keys, the record encoders (protobuf, JSON) and the writer
that produces them.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from dagger.config.model import Json
from dagger.errors import DaggerConfigError, SinkError
from dagger.plugins.sink import Sink, SinkSettings, SinkWriter
from dagger.serde.json_schema import JsonSchemaError, json_struct
from dagger.serde.variant import is_json_text
from dagger.sinks.rejected import RejectedRows, RowsRefused, isolate
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    from dagger.schema.descriptor_sets import DescriptorSet

_ENCODERS = BuiltCache(32)


class KafkaSinkSettings(SinkSettings):
    """Kafka: rows encoded as protobuf (or JSON objects) and produced in batches with librdkafka."""

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
    SINK_KAFKA_DATA_TYPE: Literal["PROTO", "JSON", "AVRO"] = Field(
        "PROTO", description="PROTO, JSON (one object per row), or beyond Dagger AVRO (encoded by Spark's `to_avro`)."
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
        return self.SINK_KAFKA_WIRE_FORMAT == "confluent"

    @model_validator(mode="after")
    def _required(self) -> KafkaSinkSettings:
        self.require("kafka", "SINK_KAFKA_BROKERS", "SINK_KAFKA_TOPIC")
        if self.SINK_KAFKA_DATA_TYPE == "PROTO":
            self.require("kafka", "SINK_KAFKA_PROTO_MESSAGE")
        return self


def _framed(values: pa.BinaryArray, header: bytes | None) -> pa.BinaryArray:
    """``values`` behind Confluent's header (as they are without one), column-wise."""
    if header is None:
        return values
    return pc.binary_join_element_wise(pa.scalar(header, pa.binary()), values, pa.scalar(b"", pa.binary()))


def _encoder(descriptor_set_b64: str, message: str, key: str) -> Any:
    """One encoder per (descriptor set, message) per Python worker."""

    def build() -> Any:
        from google.protobuf import descriptor_pb2

        from dagger.schema.descriptor_sets import build_pool
        from dagger.serde.encode import ProtoEncoder

        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(descriptor_set_b64))
        return ProtoEncoder(build_pool(fds).FindMessageTypeByName(message), key)

    return _ENCODERS.get(content_key(message, key, descriptor_set_b64), build)


class _KafkaWriter(SinkWriter):
    def __init__(self, sink: KafkaSink, partition_id: int, batch_id: int):
        from dagger.kafka.producer import ProduceError, open_producer

        self.sink = sink
        self.rejected = RejectedRows(sink, batch_id, partition_id)
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
        if sink.data_type == "AVRO":
            values = batch.column(sink.jvm_column("value"))
            if values.null_count:
                from dagger.serde.avro_encode import null_fields

                rows = [int(i) for i in pc.indices_nonzero(pc.is_null(values)).to_pylist()]
                raise RowsRefused("INVALID_MESSAGE_ERROR", null_fields(sink.avro_schema, batch, rows), rows)
            return _framed(values, sink.header), None
        if sink.data_type == "JSON":
            if sink.json_schema:
                batch = _json_shape(sink.json_schema).shape(batch)
            return _framed(pa.array(json_lines(batch), pa.binary()), sink.header), None
        try:
            values = _encoder(sink.descriptor_set_b64, sink.value_message, "SINK_KAFKA_PROTO_MESSAGE").encode(batch)
            keys = (
                _encoder(sink.descriptor_set_b64, sink.key_message, "SINK_KAFKA_PROTO_KEY").encode(batch)
                if sink.key_message
                else None
            )
        except SinkError as exc:  # a value the message cannot take: find the rows, reject only them
            raise RowsRefused("INVALID_MESSAGE_ERROR", str(exc)) from None
        return _framed(values, sink.header), keys

    def _produce(self, batch: pa.RecordBatch) -> None:
        from dagger.kafka.producer import ProduceError

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


def _json_shape(schema: str) -> JsonShape:
    """One :class:`JsonShape` per ``SINK_KAFKA_JSON_SCHEMA`` per Python worker."""
    return _ENCODERS.get(content_key("json-schema", schema), lambda: JsonShape(schema))


class JsonShape:
    """Output rows shaped by ``SINK_KAFKA_JSON_SCHEMA``: its top-level properties, in order, with their types."""

    def __init__(self, schema: str):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.schema = to_arrow_schema(json_struct(schema, "SINK_KAFKA_JSON_SCHEMA"), timezone="UTC")

    def columns(self, names: list[str]) -> list[int] | str:
        """The output column (index) of each property, or why the output cannot be shaped."""
        if all(p in names for p in self.schema.names):
            return [names.index(p) for p in self.schema.names]
        if len(names) == len(self.schema.names):
            return list(range(len(names)))  # as Dagger: the i-th column is the i-th property
        missing = [p for p in self.schema.names if p not in names]
        return (
            f"SINK_KAFKA_JSON_SCHEMA: properties {', '.join(missing)} match no output column "
            f"({', '.join(names)}), and the schema has {len(self.schema.names)} properties for {len(names)} "
            "columns (with as many, they are matched by position)"
        )

    def shape(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` as the schema's objects; a value that does not convert refuses the batch (the writer then
        finds and rejects its rows)."""
        picked = self.columns(batch.schema.names)
        if isinstance(picked, str):
            raise SinkError(picked)
        columns = []
        for target, index in zip(self.schema, picked, strict=True):
            column = batch.column(index)
            try:
                columns.append(column if column.type == target.type else column.cast(target.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise RowsRefused(
                    "INVALID_MESSAGE_ERROR",
                    f"column {batch.schema.names[index]} ({column.type}) cannot be written as {target.name} "
                    f"({target.type}) of SINK_KAFKA_JSON_SCHEMA: {exc}",
                ) from None
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def json_lines(batch: pa.RecordBatch) -> list[bytes]:
    """One compact JSON object per row, numbers at full precision.

    Doubles are written in their shortest form that reads back to the same double (orjson), floats in the
    shortest form that reads back to the same float (``1.1``, not ``1.100000023841858``), whole decimals as
    integers and other decimals exactly; timestamps as ISO-8601 UTC with microseconds (``...T03:04:05.123456Z``),
    binary as text, maps as ``[key, value]`` pairs.
    """
    import orjson

    columns = {}
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if is_json_text(field):  # an untyped lookup output of objects or mixed types: its JSON as is
            columns[field.name] = [None if v is None else orjson.Fragment(v) for v in column.to_pylist()]
        else:
            columns[field.name] = _json_ready(column).to_pylist()
    names = list(columns)
    values = [columns[n] for n in names]
    dumps, default, utc = orjson.dumps, _json_default, orjson.OPT_UTC_Z  # nested timestamps: ...Z as well
    return [dumps(dict(zip(names, row, strict=True)), default=default, option=utc) for row in zip(*values, strict=True)]


def _json_ready(column: pa.Array) -> pa.Array:
    """Columns whose Python values orjson would print differently from what the sink promises, converted."""
    t = column.type
    if pa.types.is_float32(t):  # the float's own shortest digits, as a double
        return pc.cast(pc.cast(column, pa.string()), pa.float64())
    if pa.types.is_timestamp(t):
        utc = column.cast(pa.timestamp("us", tz="UTC"))
        return pc.strftime(utc, format="%Y-%m-%dT%H:%M:%SZ")  # %S carries the microseconds
    return column


def _json_default(value: Any) -> Any:
    import decimal

    import orjson

    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else orjson.Fragment(str(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


class KafkaSink(Sink):
    """Protobuf (or JSON) records to ``SINK_KAFKA_TOPIC``."""

    name = "kafka"
    rerun = "duplicates: its records are produced again (the Kafka sink is at-least-once; with SINK_KAFKA_PROTO_KEY and a compacted topic, readers keep one record per key)"

    #: AVRO: the records' schema (JSON); Confluent's format: the schema's id, the header each record gets, the
    #: subject, how the schema is had, and the registry
    avro_schema: str | None = None
    schema_id: int | None = None
    header: bytes | None = None
    subject: str | None = None
    auto_register: bool = False
    record_name: str = "dagger.Record"
    registry: dict[str, Any] | None = None  # a ConfluentSettings' fields, given by build_sinks

    def __init__(
        self,
        topic: str,
        producer_config: dict[str, str | bool],
        descriptor_set_b64: str = "",
        value_message: str | None = None,
        key_message: str | None = None,
        data_type: str = "PROTO",
        json_schema: str | None = None,
    ):
        self.topic = topic
        self.json_schema = json_schema
        self.producer_config = producer_config
        self.descriptor_set_b64 = descriptor_set_b64
        self.value_message = value_message
        self.key_message = key_message
        self.data_type = data_type

    @classmethod
    def from_settings(cls, config: KafkaSinkSettings, descriptors: DescriptorSet | None) -> KafkaSink:
        producer = {
            "bootstrap.servers": config.SINK_KAFKA_BROKERS,
            "linger.ms": str(config.SINK_KAFKA_LINGER_MS),
            "queue.buffering.max.messages": "1000000",
            "queue.buffering.max.kbytes": "1048576",
            "batch.num.messages": "10000",
            "delivery.report.only.error": "true",  # no Python callback per delivered record
        }
        if config.SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE:
            producer.update({"message.max.bytes": "20971520", "compression.type": "snappy"})
        producer.update({k: str(v) for k, v in config.SINK_KAFKA_PRODUCER_CONFIG.items()})
        # confluent-kafka reads this one key itself, as a bool
        producer["delivery.report.only.error"] = producer["delivery.report.only.error"].lower() == "true"
        value = key = None
        blob = ""
        if config.SINK_KAFKA_DATA_TYPE == "PROTO":
            descriptors.find_message(config.SINK_KAFKA_PROTO_MESSAGE, "SINK_KAFKA_PROTO_MESSAGE")
            value = config.SINK_KAFKA_PROTO_MESSAGE
            named = [
                (name, value)
                for name, value in (
                    ("SINK_KAFKA_PROTO_KEY", config.SINK_KAFKA_PROTO_KEY),
                    ("SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS", config.SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS),
                )
                if value
            ]
            if len({value for _, value in named}) > 1:
                raise DaggerConfigError(
                    f"SINK_KAFKA_PROTO_KEY ({named[0][1]}) and SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS ({named[1][1]}) "
                    "name different key messages; keep one"
                )
            if named:
                descriptors.find_message(named[0][1], named[0][0])
                key = named[0][1]
            blob = base64.b64encode(descriptors.serialized).decode()
        json_schema = config.SINK_KAFKA_JSON_SCHEMA if config.SINK_KAFKA_DATA_TYPE == "JSON" else None
        if json_schema:
            try:
                _json_shape(json_schema)  # an unusable schema is a config error before start
            except JsonSchemaError as exc:
                raise DaggerConfigError(str(exc)) from None
        sink = cls(config.SINK_KAFKA_TOPIC, producer, blob, value, key, config.SINK_KAFKA_DATA_TYPE, json_schema)
        sink._registry(config, descriptors)
        return sink

    def _registry(self, config: KafkaSinkSettings, descriptors: DescriptorSet | None) -> None:
        """The records' schema: looked up (pinned with the descriptor sets), given, or derived in check() and
        registered in prepare(); with Confluent's format, the header each record gets."""
        from dagger.sinks.kafka_registry import header, looked_up, message_path, sink_subject

        self.auto_register = config.SINK_KAFKA_SCHEMA_AUTO_REGISTER
        self.record_name = config.SINK_KAFKA_AVRO_RECORD_NAME
        if config.SINK_KAFKA_WIRE_FORMAT != "confluent":
            if self.data_type == "AVRO" and config.SINK_KAFKA_AVRO_SCHEMA:
                from dagger.serde.formats import load_text

                self.avro_schema = load_text(config.SINK_KAFKA_AVRO_SCHEMA, "SINK_KAFKA_AVRO_SCHEMA")
            return
        self.subject = sink_subject(config)[0]
        if self.auto_register:
            return
        schemas = looked_up(descriptors, self.subject, self.data_type)
        self.schema_id = schemas.reader_id
        path = None
        if self.data_type == "AVRO":
            self.avro_schema = schemas.avro_schema()
        elif self.data_type == "JSON":
            self.json_schema = self.json_schema or schemas.reader["schema"]
        else:
            path = message_path(schemas.file_descriptors()[-1], self.value_message)
            if path is None:
                raise DaggerConfigError(
                    f"SINK_KAFKA_PROTO_MESSAGE: {self.value_message} is not a message of subject {self.subject!r}'s "
                    f"schema (id {self.schema_id}); register its file there, or set SINK_KAFKA_SCHEMA_AUTO_REGISTER=true"
                )
        self.header = header(self.schema_id, path)

    def jvm_columns(self, names: list[str]) -> dict[str, Any]:
        """AVRO: each row's datum, encoded in the JVM by Spark's ``to_avro``."""
        if self.data_type != "AVRO":
            return {}
        from dagger.serde.avro_encode import avro_column

        return {self.jvm_column("value"): avro_column(self.avro_schema)}

    def describe(self) -> str:
        what = (
            f"{self.value_message}" + (f" (key {self.key_message})" if self.key_message else "")
            if self.data_type == "PROTO"
            else "JSON"
        )
        return f"kafka topic {self.topic} on {self.producer_config['bootstrap.servers']} as {what}"

    def check(self, schema: pa.Schema) -> list[str]:
        if self.data_type == "AVRO":
            from dagger.serde.avro_encode import derived_schema, fit_problems

            if self.avro_schema is None or (self.auto_register and self.schema_id is None):
                try:
                    self.avro_schema = derived_schema(schema, self.record_name)
                except ValueError as exc:
                    return [f"SINK_KAFKA_DATA_TYPE=AVRO: {exc}"]
                return []
            where = f"subject {self.subject!r}" if self.subject else "SINK_KAFKA_AVRO_SCHEMA"
            return fit_problems(self.avro_schema, schema, where)
        if self.data_type == "JSON" and self.subject is not None and self.auto_register and not self.json_schema:
            from dagger.sinks.kafka_registry import json_schema_of

            self.json_schema = json_schema_of(schema, self.record_name)
        if self.data_type != "PROTO":
            picked = _json_shape(self.json_schema).columns(schema.names) if self.json_schema else []
            return [picked] if isinstance(picked, str) else []
        problems = []
        for message, key in (
            (self.value_message, "SINK_KAFKA_PROTO_MESSAGE"),
            (self.key_message, "SINK_KAFKA_PROTO_KEY"),
        ):
            if not message:
                continue
            encoder = _encoder(self.descriptor_set_b64, message, key)
            problems.extend(encoder.check(schema))
            if not encoder.mapped_columns(schema.names):
                problems.append(
                    f"{key}: no output column ({', '.join(schema.names)}) matches a field of {message}; "
                    "every record would be empty"
                )
        return problems

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _KafkaWriter(self, partition_id, batch_id)

    def prepare(self) -> None:
        """Auto-register: the records' schema is registered under the subject (its id goes in the header)."""
        if self.subject is None or not self.auto_register:
            return
        from dagger.schema.confluent import ConfluentSettings, register
        from dagger.sinks.kafka_registry import header, message_path, register_proto

        settings = ConfluentSettings(**self.registry)
        path = None
        if self.data_type == "AVRO":
            self.schema_id = register(settings, self.subject, self.avro_schema, "AVRO")
        elif self.data_type == "JSON":
            self.schema_id = register(settings, self.subject, self.json_schema, "JSON")
        else:
            from google.protobuf import descriptor_pb2

            from dagger.schema.descriptor_sets import build_pool

            fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(self.descriptor_set_b64))
            descriptor = build_pool(fds).FindMessageTypeByName(self.value_message)
            self.schema_id = register_proto(settings, self.subject, descriptor)
            path = message_path(descriptor.file.serialized_pb, self.value_message)
        self.header = header(self.schema_id, path)

    def reach(self) -> None:
        """At start, on the driver: the brokers must answer within :attr:`first_contact_s` and must not refuse the
        sink's login or TLS handshake. Either ends the job with its reason (a producer would retry until
        ``message.timeout.ms``, five minutes by default); an outage once the job ran is left to the producers'
        retries."""
        import time

        from confluent_kafka import KafkaError, KafkaException, Producer

        from dagger.kafka.logs import quiet
        from dagger.kafka.producer import PYTHON_CLIENT_ONLY

        refused: list[str] = []
        said: list[str] = []  # librdkafka's own reasons (a refused connection), which a metadata timeout does not say

        def on_error(error: Any) -> None:
            if error.code() != KafkaError._ALL_BROKERS_DOWN:  # "1/1 brokers are down" follows the reason: keep that
                said.append(error.str())
            if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED):
                refused.append(error.str())

        config = {k: v for k, v in self.producer_config.items() if k not in PYTHON_CLIENT_ONLY}
        producer = Producer(quiet({**config, "error_cb": on_error}))
        deadline = time.monotonic() + self.first_contact_s
        answered, last = False, ""
        while time.monotonic() < deadline and not refused:
            try:
                producer.list_topics(timeout=max(0.2, min(1.0, deadline - time.monotonic())))
                answered = True
                break
            except KafkaException as exc:
                last = exc.args[0].str()
                producer.poll(0)  # hands the error callbacks over
        producer.poll(0)
        if refused:
            text = refused[0].lower()
            hint = (
                "sasl.username and sasl.password (and sasl.mechanism)"
                if "authentication" in text or "sasl" in text
                else "ssl.ca.location and the ssl.* settings"
            )
            raise SinkError(
                f"SINK_KAFKA_BROKERS {self.producer_config.get('bootstrap.servers')}: the brokers refused the "
                f"sink's connection: {refused[0]} (check SINK_KAFKA_PRODUCER_CONFIG's {hint})"
            )
        if not answered:
            raise SinkError(
                f"sink '{self.display_name}': no broker of SINK_KAFKA_BROKERS "
                f"{self.producer_config.get('bootstrap.servers')} answered in {self.first_contact_s:.0f} s "
                f"(SPARK_FIRST_CONTACT_TIMEOUT_MS): {(said or [last])[-1] or 'no answer'} (check SINK_KAFKA_BROKERS; "
                "raise "
                "SPARK_FIRST_CONTACT_TIMEOUT_MS when the brokers start after the job)"
            )

    def commit(self, results: list[Any], batch_id: int) -> None:
        import logging

        logging.getLogger(__name__).info(
            "batch %d: %d record(s) written to %s", batch_id, sum(r or 0 for r in results), self.topic
        )
