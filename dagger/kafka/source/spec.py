"""What a Kafka stream's reader is told and how it names things: the spec the driver hands to every task, the
offsets' keys, and the decoder a spec makes (one per Python worker). Below the reader (:mod:`dagger.kafka.source`)
and the event-time probe (:mod:`dagger.kafka.source.event_time`), which both use it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import dagger.formats  # noqa: F401 - registers the built-in formats, in a Python worker too
from dagger.kafka.source.positions import Position
from dagger.plugins.format import Format, RecordDecoder, format_named
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
    data_type: str = "PROTO"  # INPUT_DATATYPE: the format whose decoder reads the records (dagger.plugins.format)
    records: dict[str, Any] = field(default_factory=dict)  # the format's reader options (Format.reader_options)
    hold_file: str | None = None  # SourceOptions.hold_file: present, the next micro-batches admit nothing new

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
        return self.records.get("rowtime_source") is not None

    @property
    def format(self) -> Format:
        """The records' format (registered by its ``INPUT_DATATYPE``; a Python worker loads it the same way)."""
        return format_named(self.data_type)

    @property
    def decodes_in_jvm(self) -> bool:
        """Whether the reader only frames the records, for the format's decoder in the JVM."""
        return self.format.decodes_in_jvm(self.records)

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


def decoder_for(spec: KafkaSourceSpec) -> RecordDecoder:
    """One decoder per (format, options, fields) per Python worker; workers are reused across tasks."""
    key = content_key(spec.data_type, json.dumps(spec.records, sort_keys=True), spec.fields, spec.rowtime)
    return _DECODERS.get(key, lambda: spec.format.decoder(spec.records, spec.fields, spec.rowtime))
