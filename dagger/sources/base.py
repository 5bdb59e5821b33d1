"""The source plugin contract and registry: what a stream's ``SOURCE_NAME`` stands for.

A source turns one ``STREAMS`` entry into a DataFrame with the table's columns (message fields,
``__internal_validation_field__`` and rowtime) and answers what the planner and the runner ask of a stream:
whether it ends, what a bounded run reads (its fingerprint), where it reads from (``dagger validate``), and what
to do once a live run stops (the Kafka source commits its final offsets). The planner and the CLI ask these
questions instead of testing which source a stream has. Register a source under each ``SOURCE_NAME`` it
serves with :func:`dagger.registry.sources.register_source`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig
    from dagger.registry.sources import SourceSettings
    from dagger.schema.registry import DescriptorSet


@dataclass
class SourceOptions:
    """Run-wide source settings that are not part of a stream's own config."""

    commit_offsets: bool = True
    bounded: bool = False  # every stream has an end: the job runs as one batch query
    from_ms: int | None = None  # dagger run --from: every Kafka stream starts here
    to_ms: int | None = None  # dagger run --to: every Kafka stream stops here (exclusive)
    fields: dict[str, list[str]] | None = None  # table -> the message fields to decode (absent: all)
    event_time: bool = True  # the job's results depend on the watermark: read Kafka partitions aligned in event time
    #: a file on the driver's machine whose presence means "admit no new input": the runner stopping the job
    #: creates it so that the running micro-batch is the last one (a live source then plans none)
    hold_file: str | None = None


class Source(ABC):
    """A kind of input stream, registered under the ``SOURCE_NAME`` values users write."""

    #: the ``SOURCE_NAME`` values this source serves
    names: ClassVar[tuple[str, ...]]
    #: the ``SOURCE_TYPE`` it goes with (``UNBOUNDED`` or ``BOUNDED``)
    source_type: ClassVar[str]
    #: its settings model: the ``SOURCE_*`` keys of its streams, read through ``stream.settings``
    settings: ClassVar[type[SourceSettings]]
    #: whether ``dagger run --from/--to`` can replay it
    replayable: ClassVar[bool] = False
    #: whether its reader decodes only the fields the SQL names (:class:`SourceOptions` ``fields``); sources
    #: Spark prunes by itself (Parquet) leave this off
    decodes_named_fields: ClassVar[bool] = False

    def check(self, stream: StreamConfig) -> None:  # noqa: B027 - optional hook
        """Raise ``ValueError`` naming a key this stream lacks or sets wrongly (run while the config loads)."""

    @abstractmethod
    def is_bounded(self, stream: StreamConfig, to_ms: int | None = None) -> bool:
        """Whether the stream ends (a bounded run reads it whole and exits); ``to_ms`` is ``dagger run --to``."""

    @abstractmethod
    def build(
        self,
        spark: SparkSession,
        stream: StreamConfig,
        config: JobConfig,
        descriptors: DescriptorSet,
        options: SourceOptions,
    ) -> DataFrame:
        """The stream's DataFrame: streaming, or a batch one when ``options.bounded``."""

    @abstractmethod
    def location(self, stream: StreamConfig) -> str:
        """Where the stream reads from, for ``dagger validate`` and logs."""

    @abstractmethod
    def input_description(
        self, spark: SparkSession, stream: StreamConfig, from_ms: int | None, to_ms: int | None
    ) -> dict[str, Any]:
        """What a bounded run of the stream reads (part of the run's fingerprint: same input, same batch id)."""

    def invalid_record_policy(self, stream: StreamConfig) -> str:
        """What the stream's reader does with a record it cannot decode: ``fail``, ``drop`` or ``dead-letter``."""
        return "fail"

    def passing_invalid_records(self, stream: StreamConfig) -> StreamConfig:
        """The stream as read when Dagger's ``InvalidRecordFilterTransformer`` follows it: records the reader cannot
        decode reach the transformer (marked invalid) instead of failing the job, unless the stream set a policy."""
        return stream

    def dead_letter_topic(self, stream: StreamConfig) -> str | None:
        """The stream's own dead-letter topic under the ``dead-letter`` policy (None: the job's output)."""
        return None

    def finish(self, progress: dict[str, Any], streams: list[StreamConfig], config: JobConfig) -> None:  # noqa: B027
        """Called once when a live run stopped cleanly, with the last query progress and this source's streams."""
