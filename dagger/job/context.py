"""What every stage of a job shares: :class:`JobContext` (config, run options, Spark session, checkpoint store,
the descriptor sets in use and the job's counters) and :class:`JobCounters`, the one object the runner's observers
read numbers from.

The stages (:mod:`~dagger.job.descriptors`, :mod:`~dagger.job.inputs`, :mod:`~dagger.job.plan`,
:mod:`~dagger.job.start`) are functions of a context; :class:`dagger.job.Job` runs them in order. Everything here
runs on the driver.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger.checkpoint import CheckpointStore, has_scheme
from dagger.errors import DaggerConfigError
from dagger.kafka import spark_connector
from dagger.plugins.source import source_of
from dagger.session.spark import get_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.checkpoint import CheckpointStore
    from dagger.config.model import JobConfig, StreamConfig
    from dagger.functions import FunctionCatalog
    from dagger.job.fixtures import JobFixtures
    from dagger.plugins.sink import Sink
    from dagger.plugins.source import Source
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger("dagger")


@dataclass(frozen=True)
class RunOptions:
    """How this run of the job goes (``dagger run`` flags), beside what its config says."""

    #: overrides ``SPARK_CHECKPOINT_LOCATION``
    checkpoint_dir: str | None = None
    #: process what the sources hold now, emit every window the watermark closes, and stop
    available_now: bool = False
    #: commit consumed offsets to each Kafka stream's consumer group
    commit_offsets: bool = True
    #: ``dagger run --from`` / ``--to``: replay a time range (epoch ms)
    from_ms: int | None = None
    to_ms: int | None = None
    #: planned for ``dagger validate`` only: nothing is asked of the brokers (a real-time stream's group offsets)
    validating: bool = False


@dataclass
class JobCounters:
    """Every counter and fact of a started job its observers (progress, telemetry) read (:class:`~dagger.job.view.
    JobView`); the stages fill it in."""

    #: sink display name → outcome (``written``, ``dead_letters``, ``dropped``) → Spark accumulator
    sinks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: sinks whose written rows Spark counts itself (``numOutputRows``): a real-time query's Kafka sink
    progress_sinks: list[str] = field(default_factory=list)
    #: external source label (``HTTP.0``) → its metrics (calls, failures by kind, latency histogram)
    lookups: dict[str, Any] = field(default_factory=dict)
    #: classic Longbow's counters (Dagger's longbow.writer / longbow.reader meters), None without Longbow
    longbow: Any = None
    #: DARTS' counters and stores (the UDF context), None before the functions are registered
    udf_context: Any = None
    #: the functions of the library the SQL calls by name
    functions_used: list[str] = field(default_factory=list)
    #: what each bounded stream reads (Parquet files, Kafka ranges)
    inputs: list[dict[str, Any]] = field(default_factory=list)
    #: a bounded run's per-stream Observations (rows, invalid rows)
    input_observations: dict[str, Any] = field(default_factory=dict)
    #: the processors' Observations of a bounded run (name → Observation)
    processor_observations: dict[str, Any] = field(default_factory=dict)


class JobContext:
    """The state the stages of one job share. Built from a bound config and the run's options."""

    def __init__(
        self,
        config: JobConfig,
        options: RunOptions,
        spark: SparkSession | None = None,
        fixtures: JobFixtures | None = None,
    ):
        self.config = config
        self.options = options
        #: ``dagger test``'s stand-ins for the outside world (None in every run of a job)
        self.fixtures = fixtures
        self.checkpoint = (
            options.checkpoint_dir or config.SPARK_CHECKPOINT_LOCATION or str(Path("checkpoints") / config.job_slug)
        )
        self.counters = JobCounters()
        #: each stream's source, looked up once (table → source)
        self.sources: dict[str, Source] = {s.INPUT_SCHEMA_TABLE: source_of(s) for s in config.STREAMS}
        if fixtures is not None:
            self.sources.update(fixtures.sources)
        self.bounded = fixtures.bounded if fixtures is not None else self._is_bounded()
        #: Spark's real-time mode: streams read by Spark's Kafka source, one Kafka sink (dagger.kafka.spark_connector)
        self.real_time = config.SPARK_TRIGGER_MODE == "real-time" and fixtures is None  # a test runs micro-batches
        #: the streams read by Spark's Kafka source and the sink written by Spark's Kafka sink (real-time mode, or
        #: micro-batches by SPARK_KAFKA_CONNECTOR: dagger.job.plan.choose_connector), and why (validate shows it)
        self.spark_kafka = self.real_time
        #: what reads the Kafka streams: Dagger's reader in Python workers (``dagger``), Dagger's reader in the JVM
        #: (``jvm``), Spark's Kafka source (``spark``: real-time mode too)
        self.kafka_reader = "spark" if self.real_time else "dagger"
        self.connector_note: str | None = None
        #: while this file exists, live sources admit no new input (:meth:`dagger.job.Job.stop`)
        self.hold_file = str(Path(tempfile.gettempdir()) / f"dagger-hold-{config.job_slug}-{uuid.uuid4().hex[:8]}")
        #: the descriptor sets in use (:mod:`dagger.job.descriptors` fetches, pins and refreshes them)
        self.descriptor_set: DescriptorSet | None = fixtures.descriptor_set if fixtures is not None else None
        #: session settings the job's processors asked for (ProcessorContext.session_settings)
        self.processor_settings: dict[str, str] = {}
        self.catalog: FunctionCatalog | None = None
        self.built_sinks: tuple[Any, list[Sink]] | None = None  # (the descriptor sets they were built for, the sinks)
        #: the runner's first contact found every sink's destination (Job.reach); a test's sinks have none
        self.sinks_reached = fixtures is not None
        self._spark = spark
        self._store: CheckpointStore | None = None

    def source(self, stream: StreamConfig) -> Source:
        """The stream's source."""
        return self.sources[stream.INPUT_SCHEMA_TABLE]

    def _is_bounded(self) -> bool:
        """True when every stream has an end (Parquet, or Kafka with an end position or ``--to``)."""
        kinds = {s.INPUT_SCHEMA_TABLE: self.source(s).is_bounded(s, self.options.to_ms) for s in self.config.STREAMS}
        if all(kinds.values()):
            return True
        if any(kinds.values()):
            bounded = ", ".join(t for t, b in kinds.items() if b)
            unbounded = ", ".join(t for t, b in kinds.items() if not b)
            raise DaggerConfigError(
                f"STREAMS: {bounded} bounded but {unbounded} not; a job reads either bounded streams (Parquet, "
                "or Kafka with SOURCE_KAFKA_ENDING_OFFSETS / SOURCE_KAFKA_ENDING_TIMESTAMP or `dagger run --to`) "
                "or unbounded ones"
            )
        return False

    @property
    def spark(self) -> SparkSession:
        """The job's Spark session (created from the config on first use, unless one was given)."""
        if self._spark is None:
            config = self.config
            if self.real_time and not self.options.validating:
                master = spark_connector.local_master(config, spark_connector.partition_counts(config))
                if master is not None:  # a reader task per partition, all the time: one thread each
                    log.info(
                        "real-time mode: the topics have more partitions than this machine has cores; the local "
                        "session runs %s (a thread per partition: the tasks mostly wait for records)",
                        master,
                    )
                    config = config.model_copy(update={"SPARK_MASTER": master})
            self._spark = get_session(config)
        return self._spark

    @property
    def jvm_protobuf(self) -> bool:
        """Whether protobuf can be decoded and encoded in the JVM where the records never meet Python (real-time
        mode, Spark's Kafka connector): ``SPARK_PROTOBUF_CODEC`` other than ``ptars``, and Dagger's JVM classes on
        the session's class path (a warning once when they are not)."""
        if self.config.SPARK_PROTOBUF_CODEC == "ptars":
            return False
        from dagger.serde.proto_jvm import jvm_codec_or_warn  # start-up: loads numpy

        return jvm_codec_or_warn(self.spark)

    @property
    def store(self) -> CheckpointStore:
        """The job's own files under the checkpoint (descriptor pin, bounded runs, sink markers), where Spark puts
        its own: a plain path is qualified by Hadoop's ``fs.defaultFS`` (HDFS on many clusters, else the disk)."""
        if self._store is None:
            location = self.checkpoint
            if not has_scheme(location):
                jvm = self.spark._jvm
                path = jvm.org.apache.hadoop.fs.Path(location)
                conf = self.spark.sparkContext._jsc.hadoopConfiguration()
                location = str(path.getFileSystem(conf).makeQualified(path).toString())
            self._store = CheckpointStore(location, self.config.SPARK_CONF.get("spark.hadoop.fs.s3a.endpoint"))
        return self._store

    @property
    def commits_offsets(self) -> bool:
        """Whether consumed offsets go to the consumer groups (not in a replay)."""
        return self.options.commit_offsets and self.options.from_ms is None and self.options.to_ms is None
