"""Kafka source: a PySpark Python streaming data source on librdkafka, decoding protobuf with ptars.

A :class:`pyspark.sql.datasource.DataSourceStreamReader` (registered as ``dagger-kafka``). Spark's own Kafka
connector is on the class path too (:mod:`dagger.session.jars`), but this reader stays the micro-batch path: on the same
records it ran the stateless job 2.6x faster (857k against 336k records/s, bench/results/connectors.md), filling
Arrow buffers from librdkafka in C where Spark's connector hands rows to the Python workers.

* **Offsets** are ``{"<topic>:<partition>": next_offset}`` dicts kept in Spark's checkpoint, tagged with their
  stream (``"@table": "<INPUT_SCHEMA_TABLE>"``), so that the query progress says which stream each source is
  (Spark describes a Python source by object identity only) and final commits reach the right group. A new query
  starts from the consumer group's committed offsets, else from ``auto.offset.reset``. Topics are matched
  against ``SOURCE_KAFKA_TOPIC_NAMES`` as a whole-name regular expression every trigger, so topics and
  partitions that appear while the job runs are read from their beginning.
* **Admission control**: ``latestOffset(start, limit)`` honours ``ReadMaxRows`` (from
  ``SPARK_MAX_RECORDS_PER_TRIGGER``), split across partitions in proportion to their backlog, and
  ``ReadAllAvailable``. The first micro-batch after a start takes at most ``SPARK_KAFKA_READ_BATCH_SIZE``
  records per partition, so the first output is not held back by a backlog read in a cold JVM.
  ``--available-now`` (``SupportsTriggerAvailableNow``) pins the end offsets at start.
* **Reading** (on executors): one input partition per Kafka topic-partition range; each fetch
  (:mod:`dagger.kafka.source.fetcher`, librdkafka's batch API straight into Arrow buffers) asks for at most the
  records left in the range and stops at the range end or at partition EOF, never waiting out a timeout.
  Values are decoded from the Arrow binary column into Arrow record batches in Rust (ptars).
* **Commit**: after every finished micro-batch, the processed offsets are committed to the consumer group,
  so ``kafka-consumer-groups`` and lag exporters see the job. A commit takes at most
  :data:`COMMIT_TIMEOUT_SECONDS`: it goes through the admin API (``AlterConsumerGroupOffsets``), whose requests
  time out, because a consumer's own commit waits for the group's coordinator without end while the brokers are
  unreachable (``docs/investigations/commit_while_unreachable.py``), which held a job's planning past its
  unreachable-broker deadline.
* **Invalid records** follow ``SOURCE_KAFKA_INVALID_RECORD_POLICY``: ``fail`` raises an error naming topic,
  partition and offset; ``drop`` and ``dead-letter`` emit the row with ``__internal_validation_field__ =
  false`` (counted and filtered out by the job, :mod:`dagger.job.inputs`); ``dead-letter`` first writes the raw record with
  its reason and coordinates to the stream's ``SOURCE_KAFKA_DEAD_LETTER_TOPIC``, else to the job's
  dead-letter output (:mod:`dagger.dead_letter`; at-least-once).
* **Column pruning**: only the fields the query can read (``spec.fields``, :mod:`dagger.schema.projection`)
  are decoded and handed to Spark.

One module (~450 lines): the stream reader is one class of Spark's contract (offsets, admission, partitions,
commits) whose methods share its state; what a task reads is :mod:`.partitions`, commits are :mod:`.commits`.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from dagger.errors import SourceError
from dagger.kafka.refusals import BrokerErrors, refusal_kind
from dagger.kafka.source.event_time import EventTimeAligner, EventTimeProbe
from dagger.kafka.source.positions import Position, resolve
from dagger.kafka.source.spec import (
    STREAM_KEY,
    KafkaSourceSpec,
    decoder_for,
    offset_key,
    positions,
    split_offset_key,
)
from dagger.librdkafka_logs import quiet

if TYPE_CHECKING:
    pass

from dagger.kafka.source.commits import COMMIT_TIMEOUT_SECONDS, commit_within, group_client
from dagger.kafka.source.partitions import (
    ANSWER_SECONDS,
    KafkaPartition,
    KafkaRanges,
    read_partition,
    read_ranges,
    tasks,
)

log = logging.getLogger(__name__)

SOURCE_FORMAT = "dagger-kafka"
#: how long a listing of the stream's topics and partitions is reused (a new partition is read after at most this)
TOPICS_REFRESH_SECONDS = 5.0


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver-side planning (offsets, partitions, commits) and executor-side reading."""

    def __init__(self, spec: KafkaSourceSpec):
        self.spec = spec
        self._pattern = re.compile(spec.topic_pattern)
        self._consumer = None
        self._errors = BrokerErrors()  # what librdkafka said of the brokers (the planning consumer's error_cb)
        self._groups = None  # the admin client that commits to the consumer group
        self._available_now_end: dict[str, int] | None = None
        self._first_batch = True
        self._aligner = None
        self._listed: tuple[float, list[tuple[str, int]]] | None = None  # (when, the partitions) last listed
        self._reported: dict[str, int] | None = None  # the latest offsets the last planning saw
        self._reached = False  # the brokers have answered once: from then on they are waited for
        self._waiting = False  # they do not answer now (logged once)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_consumer"] = None  # librdkafka handles do not travel to executors
        state["_groups"] = None
        state["_aligner"] = None
        return state

    # -- driver side ------------------------------------------------------------------------------------

    def _admin(self):  # noqa: ANN202
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = dict(self.spec.client_config)
            conf["enable.auto.commit"] = "false"
            conf["error_cb"] = self._errors
            self._consumer = Consumer(quiet(conf))
        return self._consumer

    def _hint(self, reason: str) -> str:
        """Which of the stream's keys the reason points at."""
        key = f"STREAMS[{self.spec.table}].SOURCE_KAFKA_CONSUMER_CONFIG_"
        kind = refusal_kind(reason)
        if kind == "login":
            return f"check {key}SASL_JAAS_CONFIG (its username and password) and {key}SASL_MECHANISM"
        if kind == "tls":
            return f"check {key}SSL_TRUSTSTORE_LOCATION (the CA that signed the brokers' certificates) and {key}SSL_*"
        return (
            "check SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS and the SECURITY_PROTOCOL / SASL_* / SSL_* keys "
            "of this stream"
        )

    def _brokers(self, call: Any, what: str) -> Any:
        """``call()`` (a metadata or offset request), waited out while the brokers are unreachable: at start for
        ``SPARK_FIRST_CONTACT_TIMEOUT_MS``, once they have answered for ``SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS`` (one
        log line when they go, one when they are back); then a :class:`SourceError` naming them. A login or TLS
        refusal at start ends at once."""
        from confluent_kafka import KafkaException

        brokers = self.spec.client_config["bootstrap.servers"]
        reached = self._reached
        limit = (self.spec.unreachable_timeout_ms if reached else self.spec.first_contact_ms) / 1000
        since = time.monotonic()
        failed_once = False
        while True:
            left = limit - (time.monotonic() - since)
            try:
                # before first contact in short calls, so that a refusal reported meanwhile ends the wait
                result = call(max(1.0, min(ANSWER_SECONDS if reached else 2.0, left)))
            except KafkaException as exc:
                self._admin().poll(0)  # librdkafka hands its error callbacks over on poll
                reason = self._errors.last or exc.args[0].str()
                refused = self._errors.refused
                if not reached and (refused or time.monotonic() - since >= limit):
                    waited = "" if refused else f" (no answer in {limit:.0f} s, SPARK_FIRST_CONTACT_TIMEOUT_MS)"
                    reason = refused or reason
                    raise SourceError(
                        f"stream '{self.spec.table}': cannot {what} on {brokers}{waited}: {reason} "
                        f"({self._hint(reason)})"
                    ) from None
                if not reached:
                    continue
                if time.monotonic() - since >= limit:
                    raise SourceError(
                        f"stream '{self.spec.table}': the brokers {brokers} did not answer for {limit:.0f} s "
                        f"(SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS): {reason}. Nothing was lost: a restart resumes from "
                        "the checkpoint"
                    ) from None
                if not self._waiting and not failed_once:
                    # a connection the outage broke fails once, at its first use after the brokers are back: ask
                    # again before saying they do not answer
                    failed_once = True
                    time.sleep(0.5)
                    continue
                if not self._waiting:
                    self._waiting = True
                    log.warning(
                        "stream '%s': the brokers %s do not answer (%s); waiting up to %.0f s "
                        "(SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS)",
                        self.spec.table,
                        brokers,
                        reason,
                        limit,
                    )
                time.sleep(1.0)
                continue
            if self._waiting:
                self._waiting = False
                # a warning as the line it ends: in Spark's Python processes only warnings are shown (worker_logging)
                log.warning("stream '%s': the brokers %s answer again", self.spec.table, brokers)
            self._reached = True
            return result

    def reach(self) -> None:
        """Wait for the brokers' first answer (``SPARK_FIRST_CONTACT_TIMEOUT_MS``); a :class:`SourceError` when none
        comes, or they refuse the login."""
        self._brokers(lambda timeout: self._admin().list_topics(timeout=timeout), "list topics")

    def _topic_partitions(self) -> list[tuple[str, int]]:
        """The partitions of the topics the stream reads, listed at most every :data:`TOPICS_REFRESH_SECONDS`
        (a listing asks for every topic of the cluster: not once per micro-batch)."""
        if self._listed and time.monotonic() - self._listed[0] < TOPICS_REFRESH_SECONDS:
            return self._listed[1]
        metadata = self._brokers(lambda timeout: self._admin().list_topics(timeout=timeout), "list topics")
        found = []
        for name, topic in metadata.topics.items():
            if name.startswith("__") or not self._pattern.fullmatch(name) or topic.error is not None:
                continue
            found.extend((name, p) for p in topic.partitions)
        found.sort()
        self._listed = (time.monotonic(), found) if found else None  # none yet: look again next time
        return found

    def listed_partitions(self) -> list[tuple[str, int]]:
        """The stream's partitions as last listed (sorted), without asking the brokers."""
        return self._listed[1] if self._listed else []

    def _watermarks(self, tps: list[tuple[str, int]], known: Any = ()) -> dict[str, tuple[int, int]]:
        """Each partition's first and next offset: one ListOffsets request per leader for all of them, and one more
        for the first offsets of partitions not ``known`` (offset keys; a known one's first offset is 0 here: its
        position is what counts). Asked one partition at a time, 32 partitions took 100-200 ms of every
        micro-batch's planning here; together, 5 ms."""
        from confluent_kafka import KafkaException, TopicPartition

        if not tps:
            return {}
        consumer = self._admin()
        first = [(t, p) for t, p in tps if offset_key(t, p) not in known]

        def ask(timeout: float) -> tuple[list[Any], list[Any]]:
            high = consumer.offsets_for_times([TopicPartition(t, p, -1) for t, p in tps], timeout=timeout)
            low = (
                consumer.offsets_for_times([TopicPartition(t, p, -2) for t, p in first], timeout=timeout)
                if first
                else []
            )
            for tp in (*high, *low):
                if tp.error is not None:
                    raise KafkaException(tp.error)
            return high, low

        high, low = self._brokers(ask, "read the offsets")
        lows = {(tp.topic, tp.partition): tp.offset for tp in low}
        return {
            offset_key(tp.topic, tp.partition): (max(lows.get((tp.topic, tp.partition), 0), 0), max(tp.offset, 0))
            for tp in high
        }

    def initialOffset(self) -> dict:
        """Where the stream starts (``SOURCE_KAFKA_STARTING_*``; default the group's committed offsets)."""
        tps = self._topic_partitions()
        if not tps:
            log.warning(
                "stream '%s': no topic matches SOURCE_KAFKA_TOPIC_NAMES=%r yet; waiting for one to appear",
                self.spec.table,
                self.spec.topic_pattern,
            )
            return self._tagged({})
        offsets = self._resolve("start", self._watermarks(tps))
        log.info("stream '%s' starts at %s (group %s)", self.spec.table, offsets, self.spec.group_id)
        return self._tagged(offsets)

    def _tagged(self, offsets: dict[str, int]) -> dict:
        return {STREAM_KEY: self.spec.table, **offsets}

    def _resolve(self, which: str, marks: dict[str, tuple[int, int]]) -> dict[str, int]:
        position = self.spec.position(which) or Position("group")
        reset = self.spec.client_config.get("auto.offset.reset", "latest")
        return resolve(self._admin(), position, marks, self.spec.table, reset)

    def bounded_partitions(self, max_records: int = 1_000_000) -> list[KafkaPartition]:
        """The offset ranges from the start position to the end position, split into tasks of ``max_records``."""
        tps = self._topic_partitions()
        if not tps:
            raise SourceError(
                f"stream '{self.spec.table}': no topic on {self.spec.client_config['bootstrap.servers']} matches "
                f"SOURCE_KAFKA_TOPIC_NAMES={self.spec.topic_pattern!r}"
            )
        marks = self._watermarks(tps)
        start = self._resolve("start", marks)
        end = self._resolve("end", marks)
        log.info("stream '%s' reads %s .. %s", self.spec.table, start, end)
        parts = []
        for key in sorted(end):
            topic, partition = split_offset_key(key)
            begin = start.get(key, marks[key][0])
            for lo in range(begin, end[key], max_records):
                parts.append(KafkaPartition(topic, partition, lo, min(lo + max_records, end[key])))
        return parts

    def prepareForTriggerAvailableNow(self) -> None:
        """Pin the end offsets: an ``--available-now`` run reads up to here and stops."""
        tps = self._topic_partitions()
        self._available_now_end = {k: high for k, (_, high) in self._watermarks(tps).items()}
        log.info("stream '%s': available-now target %s", self.spec.table, self._available_now_end)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.spec.max_records_per_trigger:
            return ReadMaxRows(self.spec.max_records_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End offsets of the next micro-batch: everything available, capped by the read limit; nothing new while
        the job is stopping (its hold file exists), so that the running micro-batch is the last."""
        if self.spec.hold_file and os.path.exists(self.spec.hold_file):
            return self._tagged(positions(start))
        return self._tagged(self._latest(positions(start), limit))

    def _latest(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if self._available_now_end is not None:
            latest = dict(self._available_now_end)
            starts = {k: start.get(k, 0) for k in latest}
        else:
            tps = self._topic_partitions()
            marks = self._watermarks(tps, known=start)
            latest = {k: high for k, (_, high) in marks.items()}
            self._reported = dict(latest)  # for reportLatestOffset, which Spark calls next
            # partitions that appeared after the query started are read from their beginning
            starts = {k: start[k] if k in start else marks[k][0] for k in latest}
        for k, v in start.items():
            latest.setdefault(k, v)  # a partition that vanished keeps its position
            starts.setdefault(k, v)
        available = {k: max(latest[k], starts[k]) for k in latest}
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if self._first_batch and self._available_now_end is None:
            # the first micro-batch after a (re)start runs in a cold JVM with fresh Python workers: keep it to one
            # read batch per partition so that output appears within seconds; the next ones take the backlog
            self._first_batch = False
            first = self.spec.read_batch_size * max(1, sum(available[k] > starts[k] for k in available))
            budget = first if budget is None else min(budget, first)
        end = split_budget(starts, available, budget) if budget is not None else available
        if self.spec.aligned_delay_ms is None or not self.spec.has_rowtime or len(end) < 2:
            return end
        # last: the event-time frontier depends on what the read limit leaves unread
        aligner, finished = self._aligned(), self._available_now_end is not None
        clipped = aligner.clip(starts, end, latest, finished)
        for _ in range(3):  # the budget of partitions held back in event time goes to those that may be read
            if budget is None:
                break
            held = {k for k in clipped if clipped[k] < end[k]}
            spare = budget - sum(clipped[k] - starts[k] for k in clipped)
            growable = [k for k in clipped if k not in held and clipped[k] < available[k]]
            if not held or spare <= 0 or not growable:
                break
            end = {
                **clipped,
                **split_budget({k: clipped[k] for k in growable}, {k: available[k] for k in growable}, spare),
            }
            clipped = aligner.clip(starts, end, latest, finished)
        return clipped

    def _aligned(self) -> Any:
        if self._aligner is None:
            self._aligner = EventTimeAligner(
                EventTimeProbe(self.spec), self.spec.aligned_delay_ms, self.spec.idle_timeout_ms, self.spec.table
            )
        return self._aligner

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets for the progress (consumer lag): those the planning of this micro-batch just read,
        not a second round of requests."""
        if self._reported is not None:
            reported, self._reported = self._reported, None
            return self._tagged(reported)
        try:
            return self._tagged({k: high for k, (_, high) in self._watermarks(self._topic_partitions()).items()})
        except Exception:  # noqa: BLE001 - progress reporting must never fail the query
            return None

    def partitions(self, start: dict, end: dict) -> list[KafkaRanges]:
        start, end = positions(start), positions(end)
        parts = []
        for key, stop in sorted(end.items()):
            begin = start.get(key)
            if begin is None:
                begin = self._low(key)
            if stop > begin:
                topic, partition = split_offset_key(key)
                parts.append(KafkaPartition(topic, partition, begin, stop))
        return tasks(parts, self.spec.records_per_task)

    def _low(self, key: str) -> int:
        topic, partition = split_offset_key(key)
        return self._watermarks([(topic, partition)])[key][0]

    def commit(self, end: dict) -> None:
        """Commit the processed offsets to the consumer group (failures are logged, never fatal)."""
        end = positions(end)
        if not self.spec.commit_offsets or not end:
            return
        deadline = time.monotonic() + COMMIT_TIMEOUT_SECONDS
        table, group = self.spec.table, self.spec.group_id
        if self._groups is not None and commit_within(
            self._groups, end, table, group, COMMIT_TIMEOUT_SECONDS / 2, False
        ):
            return
        # a new client (once, if the one there was failed): the connection of a client made before an outage breaks
        # with it ("transport failure" at its first commit after), and one whose request failed during an outage
        # sometimes waited out its whole timeout afterwards for a connection it had again
        # (docs/investigations/commit_while_unreachable.py)
        self._groups = group_client(self.spec.client_config)
        if not commit_within(self._groups, end, table, group, max(deadline - time.monotonic(), 1.0)):
            self._groups = None

    def stop(self) -> None:
        self._groups = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._aligner is not None:
            self._aligner.probe.close()
            self._aligner = None

    # -- executor side ------------------------------------------------------------------------------------

    def read(self, partition: KafkaRanges) -> Iterator[Any]:
        """Consume the task's offset ranges, one after the other, and yield decoded Arrow record batches."""
        yield from read_ranges(self.spec, partition.ranges)


def split_budget(start: dict[str, int], end: dict[str, int], max_rows: int) -> dict[str, int]:
    """Split a record budget across partitions in proportion to their backlog (as Spark's Kafka source)."""
    backlog = {k: end[k] - start[k] for k in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return end
    capped = {}
    remaining = max_rows
    keys = sorted(backlog, key=lambda k: -backlog[k])
    for i, k in enumerate(keys):
        share = backlog[k] * max_rows // total if i < len(keys) - 1 else remaining
        share = min(share, backlog[k], remaining)
        capped[k] = start[k] + share
        remaining -= share
    if remaining > 0:  # rounding leftovers go to whoever still has backlog
        for k in keys:
            extra = min(remaining, end[k] - capped[k])
            capped[k] += extra
            remaining -= extra
    return capped


class KafkaDataSource(DataSource):
    """The ``dagger-kafka`` Spark data source. Its one option, ``spec``, is a :class:`KafkaSourceSpec`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_FORMAT

    def _spec(self) -> KafkaSourceSpec:
        return KafkaSourceSpec.from_option(self.options["spec"])

    def schema(self) -> StructType:
        return decoder_for(self._spec()).spark_schema

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(self._spec())

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(self._spec())


class KafkaBatchReader(DataSourceReader):
    """A bounded stream (``SOURCE_KAFKA_ENDING_*`` or ``dagger run --to``) read as one batch.

    The offset ranges are resolved once, when Spark plans the read; nothing is committed to the group.
    """

    def __init__(self, spec: KafkaSourceSpec):
        self.spec = spec

    def partitions(self) -> list[KafkaPartition]:
        planner = KafkaStreamReader(self.spec)
        try:
            return planner.bounded_partitions()
        finally:
            planner.stop()

    def read(self, partition: KafkaPartition) -> Iterator[Any]:
        if not isinstance(partition, KafkaPartition):
            return  # a range with no records: PySpark plans one placeholder partition for an empty read
        yield from read_partition(self.spec, partition)
