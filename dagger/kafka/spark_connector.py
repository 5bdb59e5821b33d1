"""Spark's real-time mode for the jobs that can run in it (``SPARK_TRIGGER_MODE=real-time``, ``dagger run
--real-time``): see docs/realtime.md.

Real-time mode takes Spark's Kafka source and sink and no Python in the query, and on Spark 4.2 stateless
queries only. Such a job's streams are read by Spark's Kafka source and decoded in the JVM: protobuf by Dagger's
own decoder (``dagger/jvm/ProtoRows.java``; Confluent's header read there too), JSON by ``from_json``; its one
Kafka sink writes protobuf by Dagger's encoder (``ProtoBytes.java``) or JSON by ``to_json`` through Spark's Kafka
sink, whose producer settings are translated from librdkafka's names (:mod:`dagger.kafka.java_client`).
:func:`refusals` names whatever keeps a job out, and :func:`task_slots` what it holds; the streams are read in
:mod:`dagger.kafka.source.spark`, the sink written in :mod:`dagger.kafka.sink.spark`.

Micro-batch jobs that need no Python take the same source and sink (``SPARK_KAFKA_CONNECTOR``):
:func:`connector_refusals` names what keeps a job on Dagger's reader and writer.

Runs on the driver (planning); the query then runs in the JVM alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.kafka.client import client_config
from dagger.librdkafka_logs import quiet
from dagger.plugins.format import format_named, format_of
from dagger.plugins.source import source_of
from dagger.session.spark import local_cores

if TYPE_CHECKING:
    from dagger.config.model import JobConfig, StreamConfig

#: plan nodes that run Python: real-time mode's operator allowlist has none of them
_PYTHON_NODES = ("PythonUDF", "PythonUDTF", "MapInArrow", "MapInPandas", "FlatMapGroupsInPandas", "PythonDataSource")


def stream_refusals(stream: StreamConfig, jvm_protobuf: bool = True) -> list[str]:
    """Why ``stream`` cannot be read in real-time mode (empty: it can); ``jvm_protobuf``: Dagger's protobuf codec
    is in the JVM (``SPARK_PROTOBUF_CODEC=jvm`` and its classes on the class path)."""

    table = stream.INPUT_SCHEMA_TABLE
    if not source_of(stream).supports_real_time:
        return [f"STREAMS[{table}]: real-time mode reads Kafka streams only (Spark's Kafka source)"]
    out = []
    refusal = format_of(stream).spark_kafka_refusal(stream, jvm_protobuf)
    if refusal is not None:
        out.append(f"STREAMS[{table}]: {refusal}")
    policy = stream.settings.SOURCE_KAFKA_INVALID_RECORD_POLICY
    if policy == "dead-letter":
        out.append(
            f"STREAMS[{table}]: SOURCE_KAFKA_INVALID_RECORD_POLICY=dead-letter writes a second output, and a "
            "real-time query has one sink; use fail or drop"
        )
    return out


def jvm_reader_refusals(stream: StreamConfig, jvm_protobuf: bool = True) -> list[str]:
    """Why Dagger's Kafka reader in the JVM cannot read ``stream`` (empty: it can)."""
    table = stream.INPUT_SCHEMA_TABLE
    if not source_of(stream).supports_real_time:
        return [f"STREAMS[{table}]: Dagger's reader in the JVM reads Kafka streams only"]
    why = format_of(stream).spark_kafka_refusal(stream, jvm_protobuf)
    if why is None and source_of(stream).invalid_record_policy(stream) == "dead-letter":
        why = "SOURCE_KAFKA_INVALID_RECORD_POLICY=dead-letter (Dagger's reader writes them in Python workers)"
    return [] if why is None else [f"STREAMS[{table}]: {why}"]


def refusals(
    config: JobConfig, bounded: bool, available_now: bool, reads_event_time: bool, df: Any, jvm_protobuf: bool = True
) -> list[str]:
    """Why the job cannot run in real-time mode, each naming what to change (empty: it can)."""
    out: list[str] = []
    if bounded or available_now:
        out.append("real-time mode runs unbounded streams: not with --available-now, --from/--to or ending offsets")
    for stream in config.STREAMS:
        out.extend(stream_refusals(stream, jvm_protobuf))
    if reads_event_time:
        out.append(
            "the SQL groups, joins, windows or deduplicates: Spark 4.2's real-time mode runs stateless queries only "
            "(projections, filters, unions, broadcast joins with static tables; Spark 4.3 adds aggregations)"
        )
    if config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_POSTPROCESSOR_ENABLE:
        out.append("pre- and post-processors run in Python workers; real-time mode runs no Python")
    python = python_nodes(df)
    if python:
        out.append(f"the query runs Python ({', '.join(python)}: a Python UDF or Longbow); real-time mode runs none")
    sinks = config.sink_configs
    if len(sinks) != 1 or not sinks[0][1].settings.supports_real_time:
        out.append("real-time mode writes one Kafka sink (SINK_TYPE=kafka); SINKS with several, or other types, no")
        return out
    sink = sinks[0][1].settings
    for part, data_type in (("value", sink.SINK_KAFKA_DATA_TYPE), ("key", sink.key_data_type)):
        key = "SINK_KAFKA_DATA_TYPE" if part == "value" else "SINK_KAFKA_KEY_DATA_TYPE"
        if data_type is None:  # the records have no key
            continue
        why = format_named(data_type).spark_sink_refusal(key, jvm_protobuf, False, real_time=True)
        if why is not None:
            out.append(why)
    if sink.SINK_KAFKA_JSON_SCHEMA or sink.SINK_KAFKA_KEY_JSON_SCHEMA:
        out.append("SINK_KAFKA_JSON_SCHEMA shapes records in Python; leave it out in real-time mode")
    return out + _producer_problems(sink)


def real_time_checks(
    config: JobConfig,
    bounded: bool,
    available_now: bool,
    reads_event_time: bool,
    df: Any,
    jvm_protobuf: bool,
    session_master: str | None,
) -> tuple[list[str], list[str]]:
    """A job planned for real-time mode: what keeps it out (each a problem naming what to change) and what it holds
    while it runs (notes: the task slots, one per Kafka partition, asked of the brokers for at most 3 s).
    ``session_master``: the running session's master; None (``dagger validate``) for the one ``dagger run`` would
    start."""
    refused = refusals(config, bounded, available_now, reads_event_time, df, jvm_protobuf)
    problems = [f"SPARK_TRIGGER_MODE=real-time: {why}" for why in refused]
    if refused:
        return problems, []
    note, refusal = task_slots(config, partition_counts(config, timeout=3.0), session_master)
    if refusal is not None:
        problems.append(f"SPARK_TRIGGER_MODE=real-time: {refusal}")
    return problems, [note]


def connector_refusals(
    config: JobConfig,
    bounded: bool,
    reads_event_time: bool,
    sinks: list[Any],
    jvm_protobuf: bool,
    protobuf_only: bool = False,
    reader: str = "spark",
) -> list[str]:
    """Why a micro-batch job keeps Dagger's Kafka reader and writer in Python workers instead of a path in the JVM
    alone (``SPARK_KAFKA_CONNECTOR``; empty: it can take it): ``reader`` ``spark`` (Spark's Kafka source) or ``jvm``
    (Dagger's reader in the JVM), both writing Spark's Kafka sink. Spark's source refuses what real-time mode
    refuses, but for the trigger, and what only Dagger's reader keeps (event-time alignment, dead letters); Dagger's
    reader in the JVM keeps both, and refuses what its format cannot decode as it reads. ``protobuf_only``: the
    ``auto`` choice, which takes protobuf streams and sinks only (JSON keeps Dagger's decoder and encoder, whose
    handling of JSON differs from ``from_json``'s and ``to_json``'s). The Python nodes of the plan are checked by
    :func:`python_nodes` once it is built."""
    out: list[str] = []
    if bounded:
        out.append("--from/--to or ending offsets bound the streams (Dagger's reader runs bounded reads)")
    for stream in config.STREAMS:
        table = stream.INPUT_SCHEMA_TABLE
        if reader == "jvm":
            why = jvm_reader_refusals(stream, jvm_protobuf)
        else:
            why = [w for w in stream_refusals(stream, jvm_protobuf) if "dead-letter" not in w]
            if source_of(stream).invalid_record_policy(stream) == "dead-letter":
                out.append(
                    f"STREAMS[{table}]: SOURCE_KAFKA_INVALID_RECORD_POLICY=dead-letter (Dagger's reader writes them)"
                )
        out.extend(why)
        if not why and protobuf_only and not format_of(stream).spark_kafka_auto:
            out.append(f"STREAMS[{table}]: INPUT_DATATYPE={stream.INPUT_DATATYPE} (auto takes protobuf streams only)")
    if reads_event_time and config.event_time_alignment and reader == "spark":
        out.append(
            "the SQL reads event time: Dagger's reader aligns the partitions in event time (SPARK_EVENT_TIME_ALIGNMENT)"
        )
    if config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_POSTPROCESSOR_ENABLE:
        out.append("pre- and post-processors run in Python workers")
    if len(sinks) != 1 or not config.sink_configs[0][1].settings.supports_real_time:
        out.append("Spark's Kafka sink writes one Kafka sink (SINK_TYPE=kafka) only")
        return out
    if sinks[0].dead_letter is not None:
        out.append("the job has a dead-letter output for rejected rows (DEAD_LETTER_KAFKA_TOPIC or DEAD_LETTER_PATH)")
    settings = config.sink_configs[0][1].settings
    for part, data_type in (("value", settings.SINK_KAFKA_DATA_TYPE), ("key", settings.key_data_type)):
        key = "SINK_KAFKA_DATA_TYPE" if part == "value" else "SINK_KAFKA_KEY_DATA_TYPE"
        if data_type is None:  # the records have no key
            continue
        why = format_named(data_type).spark_sink_refusal(key, jvm_protobuf, protobuf_only)
        if why is not None:
            out.append(why)
    if settings.SINK_KAFKA_JSON_SCHEMA or settings.SINK_KAFKA_KEY_JSON_SCHEMA:
        out.append("SINK_KAFKA_JSON_SCHEMA shapes records in Python")
    return out + _producer_problems(settings)


def _producer_problems(settings: Any) -> list[str]:
    """What keeps the sink's ``SINK_KAFKA_PRODUCER_CONFIG`` from Spark's Java producer (empty: nothing)."""
    try:
        client_config(settings, "spark_producer")
    except DaggerConfigError as exc:
        return [str(exc)]
    return []


def python_nodes(df: Any) -> list[str]:
    """The plan nodes of ``df`` that run Python (a Python UDF, Longbow), sorted."""
    plan = _analyzed_plan(df)
    return sorted({node for node in _PYTHON_NODES if node in plan})


def partition_counts(config: JobConfig, timeout: float = 5.0) -> dict[str, int] | None:
    """Each Kafka stream's partitions (table → how many its topics have now), asked of its brokers once with
    ``timeout``; None when some brokers do not answer in time."""
    from confluent_kafka import Consumer, KafkaException

    counts = {}
    for stream in config.STREAMS:
        pattern = source_of(stream).topics(stream)
        if not pattern:
            continue
        conf = client_config(stream.settings, "consumer", table=stream.INPUT_SCHEMA_TABLE, job_slug=config.job_slug)
        consumer = Consumer(quiet({**conf, "enable.auto.commit": "false"}))
        try:
            metadata = consumer.list_topics(timeout=timeout)
        except KafkaException:
            return None
        finally:
            consumer.close()
        matched = re.compile(pattern)
        counts[stream.INPUT_SCHEMA_TABLE] = sum(
            len(topic.partitions)
            for name, topic in metadata.topics.items()
            if not name.startswith("__") and matched.fullmatch(name) and topic.error is None
        )
    return counts


def task_slots(config: JobConfig, counts: dict[str, int] | None, session_master: str | None) -> tuple[str, str | None]:
    """What a real-time query holds for as long as it runs, one task slot per Kafka partition (a reader task each,
    the query's stateless work in the same task): ``(a note naming them, why the session cannot give them or
    None)``. ``session_master``: the running session's master; None (``dagger validate``) for the session ``dagger
    run`` would start."""

    if counts is None:
        return (
            "it holds a task slot per Kafka partition; the brokers did not answer, so how many is not known yet",
            None,
        )
    slots = sum(counts.values())
    detail = ", ".join(f"{table} {n}" for table, n in counts.items())
    note = f"it holds {slots} task slot(s) while it runs, one per Kafka partition ({detail})"
    master = session_master or config.SPARK_MASTER
    if not master.startswith("local"):
        return f"{note}: the cluster must keep them free for the query", None
    if session_master is None and local_master(config, counts) is not None:
        return f"{note}: `dagger run` starts its local session with local[{slots}] (a thread per partition)", None
    have = local_cores(master)
    if have < slots:
        return note, (
            f"{note}, and the local session ({master}) has {have}: the partitions beyond them would be read only "
            f"after a task ends, at the next checkpoint interval. Set SPARK_MASTER=local[{slots}] (threads, not "
            "cores: the tasks mostly wait for records), or leave it unset for `dagger run` to start that"
        )
    return note, None


def local_master(config: JobConfig, counts: dict[str, int] | None) -> str | None:
    """The local master a real-time job's session needs when SPARK_MASTER is left to its default and the topics
    have more partitions than the machine has cores (one thread per partition); None when the default serves."""

    if counts is None or "SPARK_MASTER" in config.model_fields_set or not config.SPARK_MASTER.startswith("local"):
        return None
    slots = sum(counts.values())
    return f"local[{slots}]" if slots > local_cores(config.SPARK_MASTER) else None


#: logical nodes that keep state across micro-batches (a join of two streams keeps both sides; any join is counted),
#: as the plan's JSON names their classes (or its text, where it has no JSON form, begins its lines)
_STATEFUL = re.compile(
    r"logical\.(?:Aggregate|Join|Deduplicate|DeduplicateWithinWatermark|FlatMapGroupsWithState|TransformWithState"
    r'|Window)"|^[\s:+\-!]*(?:Aggregate|Join|Deduplicate|FlatMapGroupsWithState|TransformWithState|Window)\b',
    re.M,
)


def stateful(df: Any) -> bool:
    """Whether ``df``'s query keeps state across micro-batches (an aggregation, a join, a deduplication)."""
    return _STATEFUL.search(_analyzed_plan(df)) is not None


def _analyzed_plan(df: Any) -> str:
    """The analyzed logical plan with its node and expression classes (a streaming plan cannot be optimized
    outside a running query)."""
    if df is None:
        return ""
    analyzed = df._jdf.queryExecution().analyzed()
    try:
        return analyzed.toJSON()
    except Exception:  # noqa: BLE001 - a node without a JSON form: its text still names Python nodes
        return analyzed.toString()
