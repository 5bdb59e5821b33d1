"""Typed model of a Dagger job config.

Keys are Raystack Dagger's (``STREAMS``, ``FLINK_SQL_QUERY``, ``SINK_KAFKA_*`` ...), so a Dagger job config
loads unchanged; Spark-specific settings have their own ``SPARK_*`` keys. Values may be native JSON or
Dagger's JSON-in-a-string (``"STREAMS": "[{...}]"``); numbers and booleans may be strings, as in a
``.properties`` file. Every model forbids unknown keys: a typo is an error that names the closest key.

The markdown config reference (``docs/config.md``) is generated from this module by
:func:`dagger.job.reference.render_reference`; the ``description`` of each field is its documentation.

One module (~680 lines) because it is the reference of a job's keys: every field with its description, in the
order ``docs/config.md`` lists them; the validators beside the keys they check.
"""

from __future__ import annotations

import json
import logging
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)

from dagger.config.cases import CaseConfig, check_names
from dagger.lenient_json import loads as lenient_json_loads

log = logging.getLogger(__name__)


def lenient_json(text: str, where: str) -> Any:
    """Parse ``text`` as JSON, or as leniently as Dagger's Gson does (:mod:`dagger.lenient_json`); a lenient read
    logs one warning naming ``where`` and the position strict JSON stopped at, never the text (it may hold
    passwords). Raises ``ValueError`` naming the position when even a lenient read fails."""
    try:
        value, strict = lenient_json_loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if strict is not None:
        log.warning(
            "%s is not strict JSON (%s at character %d); read leniently, as Dagger does", where, strict.msg, strict.pos
        )
    return value


def _json_in_string(value: Any, info: ValidationInfo) -> Any:
    """Accept Dagger's JSON-in-a-string form for structured values (leniently, as Dagger's Gson reads them)."""
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return None
        return lenient_json(text, info.field_name or "a config value")
    return value


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


Json = BeforeValidator(_json_in_string)
CommaList = BeforeValidator(_comma_list)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False)


# --------------------------------------------------------------------------------------------------
# Streams
# --------------------------------------------------------------------------------------------------

SourceType = Literal["BOUNDED", "UNBOUNDED"]


class SourceDetail(_Strict):
    """One element of a stream's ``SOURCE_DETAILS``."""

    SOURCE_NAME: str = Field(
        description="Which source reads the stream: a registered source (built in: `KAFKA_SOURCE`, "
        "`KAFKA_CONSUMER`, `PARQUET_SOURCE`)."
    )
    SOURCE_TYPE: SourceType = Field(description="BOUNDED (Parquet) or UNBOUNDED (Kafka).")


class _PluginEntry(BaseModel):
    """A config entry whose keys beyond its own fields belong to plugins (a stream's source and input data type, a
    sink): each plugin's keys are validated by the settings model registered with it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @property
    def keys_set(self) -> list[str]:
        """The keys this entry sets (its own fields and its plugins')."""
        return sorted({*self.model_fields_set, *(self.model_extra or {})})


class StreamConfig(_PluginEntry):
    """One entry of ``STREAMS``: a source, its schema and the SQL table it becomes.

    The entry is flat, as in Dagger: besides the keys below it holds the keys of its source (``SOURCE_NAME``) and of
    its input data type (``INPUT_DATATYPE``), each validated by the settings model registered with them
    (:mod:`dagger.plugins.source`, :mod:`dagger.plugins.format`): binding the config makes each entry a
    :class:`~dagger.plugins.bound.BoundStream` holding them as ``settings`` and ``format``.
    """

    INPUT_SCHEMA_TABLE: str = Field(description="Name of the SQL view this stream is registered as.")
    INPUT_DATATYPE: str = Field(
        "PROTO",
        description="Record encoding: a registered input data type (built in: `PROTO`; `JSON` is refused at start "
        "for now), whose keys are listed below.",
    )
    SOURCE_DETAILS: Annotated[list[SourceDetail], Json] = Field(
        default_factory=lambda: [SourceDetail(SOURCE_NAME="KAFKA_CONSUMER", SOURCE_TYPE="UNBOUNDED")],
        description="Exactly one `{SOURCE_NAME, SOURCE_TYPE}`; valid pairs are KAFKA_SOURCE/UNBOUNDED, "
        "KAFKA_CONSUMER/UNBOUNDED and PARQUET_SOURCE/BOUNDED. Both Kafka names use the same Spark source.",
    )

    @model_validator(mode="after")
    def _check_source(self) -> StreamConfig:
        if len(self.SOURCE_DETAILS) != 1:
            raise ValueError(
                f"SOURCE_DETAILS of stream '{self.INPUT_SCHEMA_TABLE}' must hold exactly one element, got "
                f"{len(self.SOURCE_DETAILS)}"
            )
        return self

    @property
    def source_name(self) -> str:
        """The ``SOURCE_NAME`` users wrote; the key of the source registry."""
        return self.SOURCE_DETAILS[0].SOURCE_NAME


# --------------------------------------------------------------------------------------------------
# Processors (shape only; the processors themselves live in dagger.processors)
# --------------------------------------------------------------------------------------------------


class TransformerConfig(_Strict):
    """One transformer: a class name (short or Dagger's qualified name) and its arguments."""

    transformation_class: str = Field(description="Transformer name, e.g. `DeDuplicationTransformer`.")
    transformation_arguments: Annotated[dict[str, Any], Json] = Field(
        default_factory=dict, description="Arguments passed to the transformer."
    )

    @model_validator(mode="after")
    def _reserved(self) -> TransformerConfig:
        if "table_name" in self.transformation_arguments:
            raise ValueError(
                "transformation_arguments must not set 'table_name': it is reserved and filled in by Dagger"
            )
        return self


class TableTransformers(_Strict):
    table_name: str = Field(description="INPUT_SCHEMA_TABLE of the stream the transformers apply to.")
    transformers: list[TransformerConfig] = Field(description="Transformers, run in order.")


class PreProcessorConfig(_Strict):
    table_transformers: list[TableTransformers] = Field(default_factory=list, description="Per-table chains.")


ExternalSource = dict[str, list[dict[str, Any]]]


class InternalSourceConfig(_Strict):
    output_field: str
    type: Literal["sql", "constant", "function"]
    value: str
    internal_processor_config: dict[str, Any] | None = None


class PostProcessorConfig(_Strict):
    external_source: ExternalSource = Field(
        default_factory=dict,
        description="Lookups by kind (`http`, `es`, `pg`, `grpc` or an installed lookup), each a list of entries "
        "validated by that lookup's settings model.",
    )
    _lookups: list = PrivateAttr(default_factory=list)

    @property
    def lookups(self) -> list[tuple[str, int, Any]]:
        """``(kind, index, settings)`` of every ``external_source`` entry, in the order they run (bound by
        :mod:`dagger.job.binding`)."""
        return self._lookups

    def bind(self, lookups: list[tuple[str, int, Any]]) -> None:
        """Set the validated lookups (:mod:`dagger.job.binding`)."""
        self._lookups = lookups

    internal_source: list[InternalSourceConfig] = Field(default_factory=list)
    transformers: list[TransformerConfig] = Field(default_factory=list)


class PythonUdfConfig(_Strict):
    PYTHON_FILES: Annotated[list[str], CommaList] = Field(
        description="`.py` or `.zip` files, comma separated: local paths, http(s) or `gs://` URLs (the `gcs` "
        "extra). In a `.py` file the function named like the file is registered under the file name upper-cased "
        "(Dagger's convention), and functions decorated with `@udfs.udf(returns=...)` under their own names."
    )
    PYTHON_ARCHIVES: str | None = Field(
        None,
        description="Archives (`.zip`, `.tar.gz`), comma separated, each `location` or `location#dir`: shipped to "
        "every executor and unpacked into `dir` (default: the archive's file name); the UDFs run in the directory "
        "that holds them, so `open('dir/file')` works as in PyFlink.",
    )
    PYTHON_REQUIREMENTS: str | None = Field(
        None,
        description="A pip requirements file (local, http(s) or `gs://`): installed at start into a cache "
        "directory named by its content (`DAGGER_CACHE_DIR`, default `~/.cache/dagger`; the next start with the same "
        "file installs nothing), importable by the UDF files and shipped to the executors. pip reads `PIP_INDEX_URL` "
        "and the file's own `--index-url` / `--find-links`; an unreachable index is a config error naming it.",
    )
    PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE: int = Field(
        10000,
        gt=0,
        description="Rows per Arrow batch sent to vectorized UDFs: Spark's "
        "`spark.sql.execution.arrow.maxRecordsPerBatch` (when set; the runner's default is 50,000).",
    )
    PYTHON_FN_EXECUTION_BUNDLE_SIZE: int = Field(100000, description="Accepted for compatibility (see docs).")
    PYTHON_FN_EXECUTION_BUNDLE_TIME: int = Field(1000, description="Accepted for compatibility (see docs).")


# --------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------


class SinkConfig(_PluginEntry):
    """One sink: its ``SINK_TYPE`` and that type's keys (top level of a job, or each element of ``SINKS``).

    The keys common to every sink are fields here; the others are the registered sink's own settings model
    (:mod:`dagger.plugins.sink`), validated against it: binding the config makes each entry a
    :class:`~dagger.plugins.bound.BoundSink` holding them as ``settings``.
    """

    SINK_TYPE: str = Field(
        "log",
        description="Where results go: a registered sink (built in: `log`, `kafka`, `influx`, `bigquery`). Unlike "
        "Dagger, an unknown value is an error, not Influx.",
    )
    SINK_NAME: str | None = Field(
        None,
        description="Name of this sink in logs, counters and dead-letter records. Default: the `SINK_TYPE` "
        "(with its position in `SINKS` when a type repeats).",
    )
    SINK_ERROR_TYPES_FOR_FAILURE: Annotated[list[str], CommaList] = Field(
        default_factory=list,
        description="Comma-separated row error types that fail the job: `DESERIALIZATION_ERROR`, "
        "`INVALID_MESSAGE_ERROR`, `UNKNOWN_FIELDS_ERROR`, `SINK_4XX_ERROR`, `SINK_5XX_ERROR`, "
        "`SINK_UNKNOWN_ERROR`, `DEFAULT_ERROR`. Rows failing with any other type go to the dead-letter output.",
    )

    @model_validator(mode="after")
    def _check_sink(self) -> SinkConfig:
        bad = [t for t in self.SINK_ERROR_TYPES_FOR_FAILURE if t not in SINK_ERROR_TYPES]
        if bad:
            raise ValueError(
                f"SINK_ERROR_TYPES_FOR_FAILURE: unknown error type {', '.join(bad)}; accepted: "
                + ", ".join(SINK_ERROR_TYPES)
            )
        return self


class NamedSink(typing.NamedTuple):
    """A sink's name and its keys."""

    name: str
    config: SinkConfig


SINK_ERROR_TYPES = (
    "DESERIALIZATION_ERROR",
    "INVALID_MESSAGE_ERROR",
    "UNKNOWN_FIELDS_ERROR",
    "SINK_4XX_ERROR",
    "SINK_5XX_ERROR",
    "SINK_UNKNOWN_ERROR",
    "DEFAULT_ERROR",
)


class JobConfig(_Strict):
    """A whole Dagger job: streams, SQL, sink and the settings around them."""

    # --- job and SQL -------------------------------------------------------------------------------
    FLINK_SQL_QUERY: str = Field(
        validation_alias="FLINK_SQL_QUERY",
        description="The query over the stream tables, in Spark SQL. Dagger's `TUMBLE`/`HOP` group windows "
        "and `TUMBLE_START/END`, `HOP_START/END` are rewritten to Spark windows. Alias: `SQL_QUERY`.",
    )
    FLINK_JOB_ID: str = Field("SQL Flink job", description="Job name; the Spark query name and a metric tag.")
    FLINK_ROWTIME_ATTRIBUTE_NAME: str = Field("rowtime", description="Name of the event-time column of every table.")
    FLINK_WATERMARK_DELAY_MS: int = Field(
        10000, ge=0, description="Bounded out-of-orderness: the watermark trails the max rowtime by this much."
    )
    FLINK_WATERMARK_INTERVAL_MS: int = Field(
        10000, description="Accepted for compatibility; Spark advances the watermark every micro-batch."
    )
    FLINK_WATERMARK_PER_PARTITION_ENABLE: bool = Field(
        False,
        description="When set, it decides how a Kafka stream's partitions are read in event time: `true`, aligned "
        "(`SPARK_EVENT_TIME_ALIGNMENT`: no partition runs ahead of the others, which keeps what Flink's "
        "per-partition watermarks keep); `false`, one watermark across the partitions, as Flink without "
        "per-partition watermarks (a partition far ahead makes the others' records late). Unset: "
        "`SPARK_EVENT_TIME_ALIGNMENT` (aligned).",
    )
    FLINK_PARALLELISM: int = Field(
        1,
        ge=1,
        description="When set: Spark's `spark.sql.shuffle.partitions` (the tasks of every aggregation, join and "
        "state store) and `spark.default.parallelism` (`SPARK_CONF` wins). Kafka is read by one task per partition "
        "whatever it says. A streaming query keeps the shuffle partitions its checkpoint was created with.",
    )
    FLINK_PARALLELISM_MAX: int = Field(50, description="Accepted for compatibility.")
    FLINK_CHECKPOINT_INTERVAL_MS: int = Field(
        30000,
        gt=0,
        description="When set: real-time mode's checkpoint interval (unless `SPARK_REALTIME_CHECKPOINT_INTERVAL_MS` "
        "is set), and for a job whose sinks are all InfluxDB or BigQuery, which Dagger flushes at each checkpoint, "
        "the micro-batch trigger interval (unless `SPARK_TRIGGER_INTERVAL_MS` is set): the same write cadence. "
        "Other micro-batch jobs checkpoint every micro-batch, and their rows are not held back.",
    )
    FLINK_CHECKPOINT_TIMEOUT_MS: int = Field(900000, description="Accepted for compatibility.")
    FLINK_CHECKPOINT_MIN_PAUSE_MS: int = Field(5000, description="Accepted for compatibility.")
    FLINK_CHECKPOINT_MAX_CONCURRENT: int = Field(1, description="Accepted for compatibility.")
    FLINK_RETENTION_IDLE_STATE_MINUTE: float = Field(
        10,
        description="Dagger drops a key's state this many minutes after it was last written (fractions of a minute "
        "are accepted here). A top-level GROUP BY without a window (COUNT, SUM, AVG, MIN, MAX) keeps each key's "
        "running aggregates in a state with that TTL and starts a key again after it was idle that long; a join of "
        "two streams without a time bound gets the bound that comes to (`a.rowtime BETWEEN b.rowtime - INTERVAL 'n' "
        "MINUTE AND b.rowtime + INTERVAL 'n' MINUTE`), so the watermark drops old rows. Both are shown by `dagger "
        "validate`; 0 keeps the state forever. Spark has no retention for other operators (SELECT DISTINCT, other "
        "aggregates): `dagger validate` and the start-up log name each with how to bound it.",
        ge=0,
    )
    FLINK_RETENTION_MIN_IDLE_STATE_HOUR: int | None = Field(None, description="Documented Dagger key; accepted.")
    FLINK_RETENTION_MAX_IDLE_STATE_HOUR: int | None = Field(None, description="Documented Dagger key; accepted.")
    FUNCTION_FACTORY_CLASSES: Annotated[list[str], CommaList] = Field(
        default_factory=list,
        description="Python modules (or `module:attribute`) whose UDFs are registered besides the built-in library. "
        "Dagger's own `org.raystack.dagger.functions.udfs.factories.FunctionFactory` (and its `io.odpf` name) "
        "means the built-in library and is accepted as is.",
    )

    # --- streams ----------------------------------------------------------------------------------
    STREAMS: Annotated[list[StreamConfig], Json] = Field(description="The input streams (JSON array).")
    SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE: bool = Field(
        False, description="Raise the consumer's per-partition fetch size to 5 MiB."
    )

    # --- sinks ----------------------------------------------------------------------------------------
    single_sink: SinkConfig = Field(
        default_factory=SinkConfig,
        description="The single-sink keys written at the top level (`SINK_TYPE`, `SINK_KAFKA_TOPIC` ...), "
        "gathered here when the config is read.",
    )
    SINKS: Annotated[list[SinkConfig], Json] | None = Field(
        None,
        description="Several sinks for one job: a JSON array of objects holding the sink keys below (each with "
        "its own `SINK_TYPE`). The SQL runs once per micro-batch and every sink receives every row. Without "
        "`SINKS`, the single-sink keys at the top level describe the one sink.",
    )

    # --- dead-letter output -----------------------------------------------------------------------
    DEAD_LETTER_KAFKA_TOPIC: str | None = Field(
        None,
        description="Kafka topic receiving rows a sink rejects and records a stream cannot decode (streams "
        "with the `dead-letter` policy). Each record carries the reason, the sink or stream, and the original "
        "coordinates in `dagger.*` headers.",
    )
    DEAD_LETTER_KAFKA_BROKERS: str | None = Field(
        None, description="Bootstrap servers of `DEAD_LETTER_KAFKA_TOPIC` (required with it)."
    )
    DEAD_LETTER_KAFKA_PRODUCER_CONFIG: Annotated[dict[str, str], Json] = Field(
        default_factory=dict, description="Extra librdkafka properties of the dead-letter producer."
    )
    DEAD_LETTER_PATH: str | None = Field(
        None,
        description="Directory receiving dead letters as JSON-lines files (local runs); one file per task "
        "that had any. Exclusive with `DEAD_LETTER_KAFKA_TOPIC`.",
    )

    # --- schema registry --------------------------------------------------------------------------
    SCHEMA_REGISTRY_STENCIL_ENABLE: bool = Field(
        True,
        description="`true`: descriptors come from `SCHEMA_REGISTRY_STENCIL_URLS`. `false` (Dagger: compiled Java "
        "classes): from the generated Python modules of `SCHEMA_REGISTRY_PYTHON_MODULES`; messages are still "
        "named by their protobuf full name.",
    )
    SCHEMA_REGISTRY_STENCIL_URLS: Annotated[list[str], CommaList] = Field(
        default_factory=list,
        description="Comma-separated FileDescriptorSet locations: http(s) URLs, `file://` URLs or paths, or "
        "`python:<module>` for a generated `*_pb2` module the driver can import.",
    )
    SCHEMA_REGISTRY_PYTHON_MODULES: Annotated[list[str], CommaList] = Field(
        default_factory=list,
        description="Beyond Dagger: comma-separated generated protobuf modules (`mypackage.booking_pb2`, importable "
        "on the driver) whose messages the job reads and writes, with `SCHEMA_REGISTRY_STENCIL_ENABLE=false`, as "
        "Dagger took compiled classes. Their descriptors (with their imports) go to the executors as descriptor "
        "sets do.",
    )
    SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS: int = Field(10000, gt=0, description="Per-request timeout.")
    SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS: str | None = Field(None, description="`Key:Value,Key2:Value2` headers.")
    SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH: bool = Field(
        False,
        description="A running job fetches its descriptor sets again every `SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS`. "
        "A compatible change (new fields, new enum values) is taken between micro-batches: the query restarts from "
        "its checkpoint with a log line, nothing lost or read twice. A change that removes or retypes a field the "
        "query uses stops the job (exit 1) naming the field. A failed fetch keeps the sets the job runs with.",
    )
    SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS: int = Field(
        900000, gt=0, description="How often a running job fetches its descriptor sets again (with auto-refresh)."
    )
    SCHEMA_REGISTRY_STENCIL_REFRESH_STRATEGY: str = Field(
        "LONG_POLLING", description="LONG_POLLING (re-fetch after TTL)."
    )
    SCHEMA_REGISTRY_STENCIL_FETCH_BACKOFF_MIN_MS: int = Field(
        60000, ge=0, description="First retry delay; doubles per retry."
    )
    SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES: int = Field(4, ge=0, description="Retries after a failed fetch.")
    SCHEMA_REGISTRY_CONFLUENT_URL: str | None = Field(
        None,
        description="Beyond Dagger: a registry speaking Confluent's REST API (Confluent Schema Registry, Karapace, "
        "Redpanda, Apicurio's ccompat API), for streams with `INPUT_SCHEMA_WIRE_FORMAT=confluent`. Comma-separated "
        "URLs, tried in order.",
    )
    SCHEMA_REGISTRY_CONFLUENT_BASIC_AUTH_USER_INFO: str | None = Field(
        None, description="`user:password` for the registry's Basic auth (`${ENV}` references work)."
    )
    SCHEMA_REGISTRY_CONFLUENT_BEARER_TOKEN: str | None = Field(
        None, description="A static bearer token for the registry (`Authorization: Bearer ...`)."
    )
    SCHEMA_REGISTRY_CONFLUENT_BEARER_LOGICAL_CLUSTER: str = Field(
        "", description="Confluent Cloud's logical cluster id sent with the bearer token (`target-sr-cluster`)."
    )
    SCHEMA_REGISTRY_CONFLUENT_TIMEOUT_MS: int = Field(10000, gt=0, description="Per-request timeout.")
    SCHEMA_REGISTRY_CONFLUENT_RETRIES: int = Field(
        3, ge=0, description="Retries of a request the registry fails with 408, 429 or 5xx, or cannot be reached."
    )

    # --- processors and UDFs ----------------------------------------------------------------------
    PROCESSOR_PREPROCESSOR_ENABLE: bool = False
    PROCESSOR_PREPROCESSOR_CONFIG: Annotated[PreProcessorConfig | None, Json] = None
    PROCESSOR_POSTPROCESSOR_ENABLE: bool = False
    PROCESSOR_POSTPROCESSOR_CONFIG: Annotated[PostProcessorConfig | None, Json] = None
    PROCESSOR_LONGBOW_ASYNC_TIMEOUT: int = Field(
        15000,
        ge=1,
        description="Milliseconds a Longbow call to Bigtable may take (a micro-batch's rows are written in one call "
        "and read in calls of up to 1,000 rows); a slower call stops the job, as in Dagger.",
    )
    PROCESSOR_LONGBOW_THREAD_CAPACITY: int = Field(
        30, ge=1, description="Longbow's Bigtable reads in flight at once per task (each of up to 1,000 rows)."
    )
    PROCESSOR_LONGBOW_GCP_PROJECT_ID: str = Field(
        "default-gcp-project", min_length=1, description="Google Cloud project of Longbow's Bigtable instance."
    )
    PROCESSOR_LONGBOW_GCP_INSTANCE_ID: str = Field(
        "default-gcp-project", min_length=1, description="Bigtable instance of Longbow's table (Dagger's default, sic)."
    )
    PROCESSOR_LONGBOW_GCP_TABLE_ID: str | None = Field(
        None, description="Longbow's Bigtable table; unset: `FLINK_JOB_ID`. Created when missing."
    )
    PROCESSOR_LONGBOW_STORE: Literal["bigtable", "state"] = Field(
        "bigtable",
        description="Where classic Longbow keeps each key's history: `bigtable` (Dagger's tables, shared with "
        "Dagger jobs and Longbow+) or `state` (Spark's state store, checkpointed with the job; no Bigtable, "
        "unbounded input only).",
    )
    PROCESSOR_LONGBOW_DOCUMENT_DURATION: str = Field(
        "90d",
        pattern=r"^\d+[mhd]$",
        description="Maximum age of Longbow's history (`<n>m`, `<n>h` or `<n>d`): the garbage-collection rule of a "
        "table Longbow creates, with one version per cell.",
    )
    UDF_DART_GCS_PROJECT_ID: str | None = Field(None, description="GCS project of the DARTS bucket.")
    UDF_DART_GCS_BUCKET_ID: str | None = Field(
        None, description="DARTS files live in gs://<bucket>/dart-get|dart-contains/."
    )
    UDF_DART_BASE_URL: str | None = Field(
        None,
        description="DARTS location: a local directory, http(s):// or gs://bucket/prefix holding dart-get/ and "
        "dart-contains/ (overrides UDF_DART_GCS_BUCKET_ID).",
    )
    PYTHON_UDF_ENABLE: bool = False
    PYTHON_UDF_CONFIG: Annotated[PythonUdfConfig | None, Json] = None

    # --- telemetry --------------------------------------------------------------------------------
    METRIC_TELEMETRY_ENABLE: bool = Field(
        True,
        description="Export the job's metrics (docs/metrics.md); `false` turns the Prometheus endpoint and StatsD off.",
    )
    METRIC_TELEMETRY_SHUTDOWN_PERIOD_MS: int = Field(
        10000,
        ge=0,
        description="After a fatal error, wait this long before exiting so the last metrics are scraped or pushed.",
    )
    METRIC_PROMETHEUS_PORT: int = Field(
        9249,
        ge=0,
        le=65535,
        description="Port of the driver's Prometheus endpoint (`/metrics`, all interfaces; Flink's Prometheus "
        "reporter port). `0`: no endpoint. A port in use is logged and the job runs without it.",
    )
    METRIC_STATSD_HOST: str | None = Field(
        None, description="StatsD/DogStatsD agent to push metrics to after every micro-batch (UDP); unset: none."
    )
    METRIC_STATSD_PORT: int = Field(8125, gt=0, le=65535, description="Port of `METRIC_STATSD_HOST`.")
    METRIC_STATSD_TAGS: str | None = Field(
        None, description="Tags added to every StatsD metric besides `job_id`: `key:value,key2:value2`."
    )

    # --- Spark ------------------------------------------------------------------------------------
    SPARK_MASTER: str = Field(
        "local[*]", description="Spark master when run by `dagger run` (spark-submit sets its own)."
    )
    SPARK_CHECKPOINT_LOCATION: str | None = Field(
        None,
        description="Checkpoint directory (offsets, state, descriptor digest). Default: "
        "`./checkpoints/<FLINK_JOB_ID>`. `dagger run --checkpoint-dir` overrides it.",
    )
    SPARK_TRIGGER_INTERVAL_MS: int = Field(
        0, ge=0, description="Micro-batch trigger interval; 0 starts the next batch as soon as one ends."
    )
    SPARK_TRIGGER_MODE: Literal["micro-batch", "real-time"] = Field(
        "micro-batch",
        description="`micro-batch`, or `real-time`: Spark's real-time mode (`dagger run --real-time`), records "
        "processed as they arrive (milliseconds) for the jobs it can run: JSON Kafka streams, a stateless SQL, one "
        "JSON Kafka sink, no Python. `dagger validate` names what keeps a job out (docs/realtime.md).",
    )
    SPARK_REALTIME_CHECKPOINT_INTERVAL_MS: int = Field(
        60_000,
        ge=5_000,
        description="Real-time mode: how often offsets, progress, metrics and the group's offsets are committed "
        "(not a latency; Spark's own default is 5 minutes). A failure replays the records since the last commit; "
        "each commit pauses the stream for 0.2-0.4 s, which sets p99 at shorter intervals (docs/realtime.md).",
    )
    SPARK_MAX_RECORDS_PER_TRIGGER: int | None = Field(
        5_000_000,
        gt=0,
        description="Admission control: at most this many Kafka records per micro-batch, per stream. Large "
        "micro-batches drain a backlog fastest (each one costs ~0.3 s of planning, commits and task start); "
        "smaller ones bound the work a restart repeats.",
    )
    SPARK_EVENT_TIME_ALIGNMENT: bool = Field(
        True,
        description="A micro-batch reads no Kafka partition further ahead in event time than the slowest other "
        "active partition plus `FLINK_WATERMARK_DELAY_MS`, so that a partition far ahead (a backlog, a lagging "
        "producer) does not make the others' records late (Spark keeps one watermark per query; Flink one per "
        "partition). `false` admits by offsets only.",
    )
    SPARK_PARTITION_IDLE_TIMEOUT_MS: int = Field(
        30_000,
        ge=0,
        description="A Kafka partition read to its end that receives nothing for this long stops holding the "
        "other partitions back in event time (Flink's idleness); in an `--available-now` run, at once.",
    )
    SPARK_FIRST_CONTACT_TIMEOUT_MS: int = Field(
        10_000,
        gt=0,
        description="How long a starting job waits for each of its Kafka brokers (sources and sinks), its "
        "descriptor-set servers and its BigQuery or InfluxDB sink to answer for the first time before it ends "
        "with the reason. Raise it for pods that start in any order (a broker that comes up after the job). Once "
        "answered, an outage is waited out as `SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS` and each sink's retries say.",
    )
    SPARK_KAFKA_READ_BATCH_SIZE: int = Field(
        50_000, gt=0, description="Records per Arrow batch produced by the Kafka reader."
    )
    SPARK_KAFKA_RECORDS_PER_TASK: int = Field(
        10_000,
        ge=0,
        description="A micro-batch reads its Kafka partitions in as few Spark tasks as give each about this many "
        "records (at most one task per partition): a live stream's small micro-batches run one task (a Python "
        "reader and writer each) instead of one per partition, which shortens them; a backlog is read with one "
        "task per partition. `0`: always one task per partition.",
    )
    SPARK_PROTOBUF_CODEC: Literal["auto", "jvm", "ptars"] = Field(
        "auto",
        description="Where protobuf records are decoded and encoded: `jvm`, by Dagger's own codec in the JVM "
        "(`dagger/jvm/Proto*.java`: the wire format straight into Spark's rows, no Python object on the record's "
        "way); `ptars`, by ptars in the Python workers (the codec before 2026-11-28); `auto` (the default): the JVM "
        "where the records never meet Python (real-time mode, Spark's Kafka connector: `SPARK_KAFKA_CONNECTOR`), "
        "ptars in Dagger's Kafka reader and writer, whose Python workers hold the records anyway (measured faster "
        "there: docs/performance.md). Without Dagger's JVM classes on the class path, ptars, with a warning.",
    )
    SPARK_KAFKA_CONNECTOR: Literal["auto", "dagger", "jvm", "spark"] = Field(
        "auto",
        description="What reads the Kafka streams and writes the Kafka sink of a micro-batch job: `jvm`, Dagger's "
        "reader in the JVM (Dagger's planning: positions, admission, event-time alignment across partitions, "
        "group commits after each batch; the records read by the Java Kafka client and decoded as they are read) "
        "and Spark's Kafka sink with Dagger's encoder, no Python worker on the records' way, for jobs that need "
        "none (SQL without Python UDFs or Longbow, no pre- or post-processors, Kafka streams of protobuf or plain "
        "JSON under `fail` or `drop`, one Kafka sink, no dead-letter output); `dagger`, Dagger's reader and writer "
        "in Python workers (librdkafka and ptars: dead letters, Python UDFs, processors, every sink); `spark`, "
        "Spark's own Kafka source and sink for such jobs without event time; `auto` (the default): `jvm` for such "
        "a job whose streams and sink are protobuf, else `dagger`, logged at start. A checkpoint keeps the form "
        "of offsets it was made with: `dagger` and `jvm` share theirs (`auto` keeps a checkpoint's own), `spark` "
        "has its own. `dagger validate` says which one a job gets and why.",
    )
    SPARK_PRUNE_INPUT_COLUMNS: bool = Field(
        True,
        description="Decode only the fields of a Kafka stream's message that the SQL names (Spark cannot prune "
        "a Python source's columns by itself). Off for a table with pre-processors or a query with `*`. With "
        "pruning, a record is validated in the fields that are read; `false` decodes and validates every field.",
    )
    SPARK_CONF: Annotated[dict[str, str], Json] = Field(
        default_factory=dict, description='Extra Spark configuration, e.g. `{"spark.sql.shuffle.partitions": "4"}`.'
    )
    SPARK_OUTPUT_MODE: Literal["auto", "append", "update", "complete"] = Field(
        "auto",
        description="`auto` uses append where Spark allows it and update otherwise (Dagger emits every update "
        "of a non-windowed aggregation).",
    )

    # --- tests ------------------------------------------------------------------------------------
    TESTS: Annotated[list[CaseConfig], Json] | None = Field(
        None,
        description="`dagger test`'s cases for this job (a JSON array; see docs/testing.md): records in, records "
        "each sink must write out. `dagger run` ignores them, and their `${VAR}`s are each case's own.",
    )

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "SQL_QUERY" in data:
            sql = data.pop("SQL_QUERY")
            data.setdefault("FLINK_SQL_QUERY", sql)
        # one sink's keys at the top level (Dagger's form): every SINK_* key, validated by the sink registry
        sink = {k: data.pop(k) for k in [k for k in data if k.startswith("SINK_")]}
        if sink:
            data["single_sink"] = sink
        return data

    @model_validator(mode="after")
    def _check(self) -> JobConfig:
        if not self.FLINK_SQL_QUERY.strip():
            raise ValueError("FLINK_SQL_QUERY (or SQL_QUERY) is required and must not be empty")
        if not self.STREAMS:
            raise ValueError("STREAMS must list at least one stream")
        tables = [s.INPUT_SCHEMA_TABLE for s in self.STREAMS]
        dupes = sorted({t for t in tables if tables.count(t) > 1})
        if dupes:
            raise ValueError(f"INPUT_SCHEMA_TABLE must be unique across STREAMS; repeated: {', '.join(dupes)}")
        if self.SINKS is not None:
            if not self.SINKS:
                raise ValueError("SINKS must list at least one sink (or be left out for the single-sink keys)")
            top = self.single_sink.keys_set
            if top:
                raise ValueError(
                    f"{', '.join(top)} set at the top level together with SINKS; move them into the SINKS entries"
                )
        if self.DEAD_LETTER_KAFKA_TOPIC and self.DEAD_LETTER_PATH:
            raise ValueError("DEAD_LETTER_KAFKA_TOPIC and DEAD_LETTER_PATH are exclusive; choose one destination")
        if self.DEAD_LETTER_KAFKA_TOPIC and not self.DEAD_LETTER_KAFKA_BROKERS:
            raise ValueError("DEAD_LETTER_KAFKA_BROKERS is required with DEAD_LETTER_KAFKA_TOPIC")
        names = [s.name for s in self.sink_configs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"SINK_NAME must be unique across SINKS; repeated: {', '.join(dupes)}")
        if self.PROCESSOR_PREPROCESSOR_ENABLE and self.PROCESSOR_PREPROCESSOR_CONFIG is None:
            raise ValueError("PROCESSOR_PREPROCESSOR_CONFIG is required when PROCESSOR_PREPROCESSOR_ENABLE is true")
        if self.PROCESSOR_POSTPROCESSOR_ENABLE and self.PROCESSOR_POSTPROCESSOR_CONFIG is None:
            raise ValueError("PROCESSOR_POSTPROCESSOR_CONFIG is required when PROCESSOR_POSTPROCESSOR_ENABLE is true")
        if self.PYTHON_UDF_ENABLE and self.PYTHON_UDF_CONFIG is None:
            raise ValueError("PYTHON_UDF_CONFIG is required when PYTHON_UDF_ENABLE is true")
        both = {"FLINK_WATERMARK_PER_PARTITION_ENABLE", "SPARK_EVENT_TIME_ALIGNMENT"}
        if (
            both <= self.model_fields_set
            and self.FLINK_WATERMARK_PER_PARTITION_ENABLE != self.SPARK_EVENT_TIME_ALIGNMENT
        ):
            raise ValueError(
                "FLINK_WATERMARK_PER_PARTITION_ENABLE and SPARK_EVENT_TIME_ALIGNMENT say different things (both decide "
                "whether Kafka partitions are read aligned in event time); keep one"
            )
        if self.TESTS:
            check_names(self.TESTS)
        if self.SPARK_TRIGGER_MODE == "real-time" and self.realtime_checkpoint_ms < 5_000:
            raise ValueError(
                f"FLINK_CHECKPOINT_INTERVAL_MS={self.FLINK_CHECKPOINT_INTERVAL_MS} is real-time mode's checkpoint "
                "interval here, and Spark takes 5000 ms or more; raise it or set SPARK_REALTIME_CHECKPOINT_INTERVAL_MS"
            )
        return self

    @property
    def sink_type_note(self) -> str | None:
        """What to tell a Dagger user whose config has no ``SINK_TYPE`` (Dagger would write to InfluxDB)."""
        if self.SINKS or "SINK_TYPE" in self.single_sink.keys_set:
            return None
        return (
            "SINK_TYPE is not set: rows go to the log sink (Dagger's default is influx); set SINK_TYPE=influx, "
            "kafka, bigquery or log to choose"
        )

    @property
    def has_dead_letter(self) -> bool:
        """Whether a job-level dead-letter destination is configured."""
        return bool(self.DEAD_LETTER_KAFKA_TOPIC or self.DEAD_LETTER_PATH)

    @property
    def sink_configs(self) -> list[NamedSink]:
        """Every sink of the job with its name: the ``SINKS`` entries, or the single-sink keys."""
        configs = self.SINKS if self.SINKS else [self.single_sink]
        types = [c.SINK_TYPE for c in configs]
        return [
            NamedSink(c.SINK_NAME or (c.SINK_TYPE if types.count(c.SINK_TYPE) == 1 else f"{c.SINK_TYPE}-{i}"), c)
            for i, c in enumerate(configs)
        ]

    @property
    def event_time_alignment(self) -> bool:
        """Whether Kafka partitions are read aligned in event time: ``FLINK_WATERMARK_PER_PARTITION_ENABLE`` when
        a config sets it (Dagger's name), else ``SPARK_EVENT_TIME_ALIGNMENT``."""
        if "FLINK_WATERMARK_PER_PARTITION_ENABLE" in self.model_fields_set:
            return self.FLINK_WATERMARK_PER_PARTITION_ENABLE
        return self.SPARK_EVENT_TIME_ALIGNMENT

    @property
    def realtime_checkpoint_ms(self) -> int:
        """Real-time mode's checkpoint interval: ``SPARK_REALTIME_CHECKPOINT_INTERVAL_MS``, else Dagger's
        ``FLINK_CHECKPOINT_INTERVAL_MS`` when a config sets it, else 60 s."""
        if "SPARK_REALTIME_CHECKPOINT_INTERVAL_MS" not in self.model_fields_set and (
            "FLINK_CHECKPOINT_INTERVAL_MS" in self.model_fields_set
        ):
            return self.FLINK_CHECKPOINT_INTERVAL_MS
        return self.SPARK_REALTIME_CHECKPOINT_INTERVAL_MS

    @property
    def trigger_interval_ms(self) -> int:
        """The micro-batch trigger interval: ``SPARK_TRIGGER_INTERVAL_MS``; else, for a job whose every sink is one
        Dagger flushes at checkpoints (InfluxDB, BigQuery), the ``FLINK_CHECKPOINT_INTERVAL_MS`` a config sets
        (the same write cadence as in Dagger); else 0 (back to back)."""
        if "SPARK_TRIGGER_INTERVAL_MS" in self.model_fields_set or "FLINK_CHECKPOINT_INTERVAL_MS" not in (
            self.model_fields_set
        ):
            return self.SPARK_TRIGGER_INTERVAL_MS
        if all(sink.settings.flushes_at_checkpoint for _, sink in self.sink_configs):
            return self.FLINK_CHECKPOINT_INTERVAL_MS
        return self.SPARK_TRIGGER_INTERVAL_MS

    @property
    def sql(self) -> str:
        """The configured query (``FLINK_SQL_QUERY`` / ``SQL_QUERY``)."""
        return self.FLINK_SQL_QUERY

    @property
    def job_slug(self) -> str:
        """``FLINK_JOB_ID`` made safe for paths and group ids."""
        return "".join(c if c.isalnum() or c in "-_." else "-" for c in self.FLINK_JOB_ID).strip("-") or "job"
