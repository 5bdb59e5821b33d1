"""What a Kafka stream's reader is told and how it names things: the spec the driver hands to every task, the
offsets' keys, and the decoder a spec makes (one per Python worker). Below the reader (:mod:`dagger.kafka.source`)
and the event-time probe (:mod:`dagger.kafka.source.event_time`), which both use it."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass
from typing import Any

from dagger.kafka.source.positions import Position
from dagger.schema.descriptor_sets import build_pool
from dagger.schema.projection import prune_message
from dagger.worker_cache import BuiltCache, content_key

#: ``fetch.wait.max.ms`` of the consumers that plan micro-batches (the event-time probe): a fetch returns as soon as
#: the record asked for is there; this is only waited where a partition has nothing past the offset (librdkafka's
#: default, 500 ms, would be paid on a micro-batch's planning)
FETCH_WAIT_MS = "100"
#: ``fetch.wait.max.ms`` of consumers that read records they know exist up to a known end (a range's reader):
#: paid wherever a read meets a partition's end before its range's (compaction, transaction markers)
READ_FETCH_WAIT_MS = "50"


@dataclass
class KafkaSourceSpec:
    """Everything a reader needs, serialisable to the single ``spec`` option of the data source."""

    table: str
    topic_pattern: str
    client_config: dict[str, str]
    descriptor_set_b64: str
    message_name: str
    rowtime_field_number: int | None
    rowtime: str = "rowtime"
    invalid_policy: str = "fail"
    dead_letter: dict[str, Any] | None = None  # a DeadLetterSpec's fields
    max_records_per_trigger: int | None = None
    read_batch_size: int = 50_000
    records_per_task: int = 10_000  # SPARK_KAFKA_RECORDS_PER_TASK: small ranges share a task; 0: one per partition
    aligned_delay_ms: int | None = None  # event-time alignment (dagger.kafka.source.event_time); None: by offsets only
    idle_timeout_ms: int = 30_000
    unreachable_timeout_ms: int = 300_000  # SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS
    first_contact_ms: int = 10_000  # SPARK_FIRST_CONTACT_TIMEOUT_MS: brokers that never answered, at start
    commit_offsets: bool = True
    start: dict[str, Any] | None = None  # a Position's fields; None: the group's offsets
    end: dict[str, Any] | None = None  # a Position's fields; None: unbounded
    time_range: list[int | None] | None = None  # [from_ms, to_ms): records outside are left out
    fields: list[str] | None = None  # the message fields to decode (dagger.schema.projection); None: all
    data_type: str = "PROTO"  # INPUT_DATATYPE: PROTO (message_name), JSON (json_schema) or AVRO (avro_*)
    json_schema: str | None = None  # INPUT_SCHEMA_JSON_SCHEMA
    rowtime_json_field: str | None = None  # INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME
    hold_file: str | None = None  # SourceOptions.hold_file: present, the next micro-batches admit nothing new
    avro_reader: str | None = None  # AVRO: the reader schema (JSON)
    avro_writers: dict[str, str] | None = None  # AVRO: writer schemas by id (JSON keys are strings)
    confluent: dict[str, Any] | None = None  # Confluent's wire format: the registry (ConfluentSettings' fields)
    rowtime_name: str | None = None  # the field that becomes rowtime (AVRO, and PROTO decoded in the JVM)
    confluent_writers: dict[str, list[str]] | None = None  # PROTO/JSON in Confluent's format: id → base64 files
    jvm_decode: bool = False  # PROTO: the values are handed to Dagger's decoder in the JVM (dagger.serde.proto_jvm)

    def to_option(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_option(cls, text: str) -> KafkaSourceSpec:
        return cls(**json.loads(text))

    @property
    def group_id(self) -> str:
        return self.client_config["group.id"]

    @property
    def has_rowtime(self) -> bool:
        """Whether the records carry an event time (a rowtime field)."""
        if self.data_type == "JSON":
            return self.rowtime_json_field is not None
        if self.data_type == "AVRO":
            return self.rowtime_name is not None
        return self.rowtime_field_number is not None

    def position(self, which: str) -> Any:
        data = getattr(self, which)
        return Position(**data) if data else None


#: the offsets' key naming their stream (every other key is "<topic>:<partition>")
STREAM_KEY = "@table"


def positions(offsets: dict | None) -> dict[str, int]:
    """The ``"<topic>:<partition>": offset`` entries of a source's offsets (without its stream tag)."""
    return {k: v for k, v in (offsets or {}).items() if k != STREAM_KEY}


def offset_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def split_offset_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


_DECODERS = BuiltCache(32)


def decoder_for(spec: KafkaSourceSpec):  # noqa: ANN202
    """One decoder per (descriptor set, message, fields) per Python worker; workers are reused across tasks."""
    key = content_key(
        spec.data_type,
        spec.message_name,
        spec.rowtime_field_number,
        spec.rowtime,
        spec.fields,
        spec.json_schema,
        spec.rowtime_json_field,
        spec.descriptor_set_b64,
        spec.avro_reader,
        spec.avro_writers,
        spec.confluent,
        spec.rowtime_name,
        spec.confluent_writers,
        spec.jvm_decode,
    )
    return _DECODERS.get(key, lambda: _build_decoder(spec))


def _build_decoder(spec: KafkaSourceSpec):  # noqa: ANN202
    if spec.data_type == "AVRO":
        from dagger.serde.avro_decode import AvroFrames  # start-up: loads numpy, pyarrow

        writers = {int(k): v for k, v in (spec.avro_writers or {}).items()}
        return AvroFrames(writers, spec.avro_reader or "", spec.confluent, spec.rowtime_name, spec.rowtime)
    if spec.jvm_decode:
        from dagger.serde.proto_jvm import ProtoFrames  # start-up: loads numpy, pyarrow

        writers = {int(k): [base64.b64decode(f) for f in v] for k, v in (spec.confluent_writers or {}).items()}
        return ProtoFrames(spec.confluent, writers, spec.message_name, spec.rowtime_name, spec.rowtime)
    inner = _plain_decoder(spec)
    if spec.confluent is None:
        return inner
    from dagger.serde.confluent_decode import ConfluentDecoder  # start-up: loads numpy, pyarrow

    writers = {int(k): [base64.b64decode(f) for f in v] for k, v in (spec.confluent_writers or {}).items()}
    protobuf = spec.data_type == "PROTO"
    return ConfluentDecoder(inner, protobuf, writers, spec.confluent, spec.message_name if protobuf else None)


def _plain_decoder(spec: KafkaSourceSpec):  # noqa: ANN202
    if spec.data_type == "JSON":
        from dagger.serde.json_decode import JsonDecoder  # start-up: loads numpy, pyarrow

        return JsonDecoder(spec.json_schema or "{}", spec.rowtime_json_field, spec.rowtime, spec.fields)
    from google.protobuf import descriptor_pb2

    from dagger.serde.decode import ProtoDecoder  # start-up: loads numpy, pyarrow

    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec.descriptor_set_b64))
    if spec.fields is not None:
        fds = prune_message(fds, spec.message_name, spec.fields)
    descriptor = build_pool(fds).FindMessageTypeByName(spec.message_name)
    return ProtoDecoder(descriptor, spec.rowtime_field_number, spec.rowtime)


def rowtime_field_name(spec: KafkaSourceSpec) -> str:
    """The message field that becomes ``rowtime``."""
    return decoder_for(spec).rowtime_source
