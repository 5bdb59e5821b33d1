"""Streaming benchmark (``make bench``): our jobs next to the hand-written limit and the Python peers, on one
broker and one machine, in one run.

Parts (``BENCH_PARTS``, comma-separated; all by default):

* ``baseline``: a hand-written confluent-kafka copy loop (consume -> produce batches, no decoding), one process
  per core (``bench/peers/copy_loop.py``): the practical ceiling for Python here.
* ``stateless``: decode -> ``WHERE amount_paid_by_cash < 500`` (about half) -> 5 fields incl. a nested one ->
  protobuf encode -> Kafka sink.
* ``stateless_ptars``, ``stateless_dagger_jvm``, ``stateless_spark_jvm``: the stateless job as before issue 53
  (ptars in Python workers, Dagger's reader and writer), with Dagger's reader and writer handing the records to the
  JVM codec, and on Spark's Kafka source and sink with the JVM codec (``SPARK_KAFKA_CONNECTOR``); ``stateless``
  runs the defaults (since issue 53: Dagger's reader in the JVM and Spark's Kafka sink, ``SPARK_KAFKA_CONNECTOR=auto``).
* ``stateless_json``: the stateless job over the same records as JSON objects (protobuf out);
  ``stateless_json_out``: JSON in and JSON out (``SINK_KAFKA_DATA_TYPE=JSON``).
* ``stateless_avro``: the stateless job over the same records as Avro in Confluent's wire format (schema in the
  test registry, ``testing.schema_registry``), decoded by Dagger's decoder in the JVM (``dagger/jvm/AvroRows.java``);
  protobuf out. ``stateless_avro_spark``: the same job with Spark's ``from_avro`` decoding, as it does when
  Dagger's JVM classes are not on the class path.
* ``stateless_spark``: the stateless workload on Spark's own Kafka connector: Spark's Kafka source, ptars decode
  in ``mapInArrow``, the SQL, ptars encode in ``mapInArrow``, Spark's Kafka sink (spark-protobuf, Spark's
  ``from_protobuf``/``to_protobuf``, is not served by Maven Central, so protobuf stays in Python workers).
* ``stateless_json_spark``: JSON in, JSON out on Spark's connector with no Python at all: ``from_json``, the SQL,
  ``to_json`` (the JVM-only path, which Spark's real-time mode can run).
* ``window``: a 1-minute tumbling window, GROUP BY two keys, COUNT/SUM/MAX -> Kafka sink; ``window_spark``: the
  same on Spark's Kafka source and sink, ptars in ``mapInArrow``, written with Spark's ``window()``.
* ``join``: an interval join of ``BENCH_JOIN_RECORDS`` records (a topic of their own) with themselves, within a
  minute either way, each record meeting exactly itself; ``join_spark``: the same SQL on Spark's Kafka source and
  sink (ptars in ``mapInArrow``). Rates are of the join's input records, each read twice.
* ``bytewax``, ``quix``: the stateless workload written with Bytewax and with Quix Streams
  (``bench/peers/``), one process per core, run from ``BENCH_PEERS_PYTHON`` (``.venv-peers``, made by
  ``make bench``).
* ``flink``, ``flink_window``: the stateless and the window SQL on Apache Flink SQL (PyFlink, the Kafka connector
  and the protobuf format from Maven Central: ``bench/peers/flink_job.py``), one process with parallelism 2, run
  from ``BENCH_FLINK_PYTHON`` (``.venv-flink``, made by ``make bench``); besides launch-to-last-output, the rate
  once running (first output to last) is reported for them and for our jobs, whose runs start in a warm session.
* ``latency_flink``: the stateless SQL on Flink, unbounded, under the latency parts' load: latency, start-up and
  memory as for ``latency``.
* ``latency``: ``dagger run`` of the stateless job (a separate process, the README's defaults) under a steady
  ``BENCH_LATENCY_RATE`` records/s: end-to-end latency from each input record's produce timestamp to its
  output record's produce timestamp, p50/p99 over ``BENCH_LATENCY_SECONDS`` after ``BENCH_WARMUP_SECONDS``;
  also the job's start-up time (launch to first output), its peak memory (PSS and RSS, by kind of process) and
  each Spark phase of a micro-batch (from the job's own metrics); ``latency.png`` plots p50/p99 per second.
* ``latency_realtime``: ``dagger run --real-time`` of the stateless workload, JSON in and out: Spark's Kafka
  source and sink in Spark's real-time mode (update mode, no Python at run time, checkpoint interval
  ``BENCH_REALTIME_CHECKPOINT_MS``, by default the job's) under the same load, measured over
  ``BENCH_REALTIME_SECONDS`` (240: four of the default intervals, each with its pause): end-to-end latency from
  each input record's produce timestamp to its output's, how many records were lost (outputs against the inputs
  the filter keeps), start-up and peak memory by kind of process.
* ``latency_realtime_proto``: the same, protobuf in and protobuf out (Dagger's codec in the JVM); every latency
  part also reports the worst p99 of any 60-s window of input time (sliding by a second).
* ``latency_ptars``, ``latency_dagger_jvm``: ``latency`` as before issue 53 (ptars in Python workers, Dagger's reader
  and writer: ``SPARK_PROTOBUF_CODEC=ptars``, ``SPARK_KAFKA_CONNECTOR=dagger``) and with Dagger's reader and writer
  handing the records to the JVM codec (``SPARK_PROTOBUF_CODEC=jvm``); ``latency_spark_jvm``: Spark's Kafka
  source and sink with the JVM codec (``SPARK_KAFKA_CONNECTOR=spark``); ``latency`` itself runs the defaults (since
  issue 53: Dagger's reader in the JVM, ``SPARK_KAFKA_CONNECTOR=auto``).
* ``stateless_spark_floor``: Spark's throughput floor, each record's value copied from its Kafka source to its sink
  (no decoding, no SQL), ``availableNow`` in the benchmark's session.
* ``latency_spark_floor``, ``latency_spark_floor_async``: Spark's own floor, nothing of ours in the query or the
  session (``bench/spark_kafka.py --bare``): each record's value copied from Spark's Kafka source to its sink, with
  Spark's defaults, and with the sink's asynchronous progress tracking.
  The latency parts' input topic has ``BENCH_LATENCY_PARTITIONS`` partitions (4).
* ``latency_window``: the same for the window job with 10-second windows and event time at wall-clock pace,
  latency counted from the input record that closes a window to the window's rows (``latency_window.png``).
* ``latency_spark``, ``latency_window_spark``: the stateless and the 10-second window job on Spark's Kafka source
  and sink (``bench/spark_kafka.py`` as a process of its own, in the session ``dagger run`` starts), measured as
  ``latency`` and ``latency_window``.
* ``latency_join``, ``latency_join_spark``: the interval join as ``dagger run`` and on Spark's connector, fed
  ``BENCH_JOIN_LATENCY_RATE`` records/s (each read twice): latency from each input to its joined row, records
  lost, start-up and memory.
* ``longbow``: ``bench/longbow.py`` in its own process (the Bigtable emulator, its own broker and session):
  rows/s of a classic Longbow job over 30-day histories on the emulator and on Spark's state store against the
  same job without Longbow, Bigtable reads/s per core and the calls' response times; it also writes
  ``longbow.json`` and ``longbow.md`` (``BENCH_LONGBOW_ROWS``, ``BENCH_LONGBOW_JOB_ROWS``, ``BENCH_LONGBOW_RUNS``,
  ``BENCH_LONGBOW_WARMUP_RUNS``).

Throughput is input records / (last output record's produce time - launch), the median of ``BENCH_RUNS`` runs
over ``BENCH_RECORDS`` records made once by ``dagger generate``. The runs are interleaved (run 1 of every part,
then run 2, ...) and each run's output topic is deleted once measured, so every run meets the same broker.
Our jobs run in one Spark session (``local[2]``), after ``BENCH_WARMUP_RUNS`` unmeasured runs each; the peers
and the baseline are launched as processes. Results: ``bench/results/streaming.json``
and ``streaming.md`` (``BENCH_RESULTS_DIR`` to write elsewhere).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")
os.environ.setdefault("DAGGER_SPARK_LOG_LEVEL", "ERROR")

RECORDS = int(os.environ.get("BENCH_RECORDS", "2000000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
WARMUP_RUNS = int(os.environ.get("BENCH_WARMUP_RUNS", "2"))  # unmeasured runs of each of our jobs (JIT warm-up)
# records of each warm-up run; 0: the measured input itself (a 300k warm-up left the first measured 2M run slow)
WARMUP_RECORDS = int(os.environ.get("BENCH_WARMUP_RECORDS", "0"))
LATENCY_RATE = float(os.environ.get("BENCH_LATENCY_RATE", "20000"))
LATENCY_SECONDS = float(os.environ.get("BENCH_LATENCY_SECONDS", "60"))
LATENCY_PARTITIONS = int(os.environ.get("BENCH_LATENCY_PARTITIONS", "4"))  # of the latency parts' input topic
WARMUP_SECONDS = float(os.environ.get("BENCH_WARMUP_SECONDS", "20"))
PARTS = os.environ.get(
    "BENCH_PARTS",
    "baseline,stateless,stateless_ptars,stateless_dagger_jvm,stateless_spark_jvm,stateless_avro,stateless_avro_spark,stateless_spark,stateless_spark_floor,stateless_json,stateless_json_out,stateless_json_spark,window,window_spark,"
    "join,join_spark,bytewax,quix,flink,flink_window,latency,latency_ptars,latency_dagger_jvm,latency_spark_jvm,"
    "latency_spark,"
    "latency_realtime,latency_realtime_proto,latency_flink,"
    "latency_window,latency_window_spark,latency_join,latency_join_spark,longbow",
).split(",")
PEERS_PYTHON = os.path.abspath(os.environ.get("BENCH_PEERS_PYTHON", str(ROOT / ".venv-peers" / "bin" / "python")))
FLINK_PYTHON = os.path.abspath(os.environ.get("BENCH_FLINK_PYTHON", str(ROOT / ".venv-flink" / "bin" / "python")))
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR", str(ROOT / "bench" / "results")))
CORES = 2
EVENTS_PER_SECOND = float(os.environ.get("BENCH_EVENTS_PER_SECOND", "10000"))  # 2M records: 200 s of event time
START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
PEERS = ROOT / "bench" / "peers"

STATELESS_SQL = (
    "SELECT order_number, service_type, driver_pickup_location AS pickup, event_timestamp, amount_paid_by_cash "
    "FROM data_stream_0 WHERE amount_paid_by_cash < 500"
)
WINDOW_SQL = (
    "SELECT service_area_id, service_type, COUNT(1) AS booking_count, SUM(total_distance_in_kms) AS "
    "total_distance_in_kms, MAX(amount_paid_by_cash) AS max_amount_paid_by_cash, "
    "TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp FROM data_stream_0 "
    "GROUP BY service_area_id, service_type, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
)
JOBS = {
    "stateless": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "stateless_json": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "stateless_avro": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "stateless_avro_spark": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "stateless_json_out": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "window": (WINDOW_SQL, "dagger.examples.BookingCountMessage"),
    "stateless_ptars": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "stateless_dagger_jvm": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
    "stateless_spark_jvm": (STATELESS_SQL, "dagger.examples.BookingSummaryMessage"),
}
#: the job settings of the parts that pin how protobuf is read and written (issue 53's before and after)
PART_SETTINGS = {
    "stateless_ptars": {"SPARK_PROTOBUF_CODEC": "ptars", "SPARK_KAFKA_CONNECTOR": "dagger"},
    "stateless_dagger_jvm": {"SPARK_PROTOBUF_CODEC": "jvm", "SPARK_KAFKA_CONNECTOR": "dagger"},
    "stateless_spark_jvm": {"SPARK_KAFKA_CONNECTOR": "spark"},
}
WATERMARK_DELAY_MS = 10_000  # FLINK_WATERMARK_DELAY_MS of the benchmark's jobs
#: the window job as a Spark user writes it (Spark's window(); its watermark on the decoded table)
WINDOW_SPARK_SQL = (
    "SELECT service_area_id, service_type, COUNT(1) AS booking_count, SUM(total_distance_in_kms) AS "
    "total_distance_in_kms, MAX(amount_paid_by_cash) AS max_amount_paid_by_cash, window.end AS window_timestamp "
    "FROM data_stream_0 GROUP BY service_area_id, service_type, window(rowtime, '1 minute')"
)
#: an interval join of the input with itself: each booking meets exactly itself (event times are unique), within a
#: minute either way; Dagger's SQL and Spark's SQL alike
JOIN_SQL = (
    "SELECT b.order_number, b.service_type, b.driver_pickup_location AS pickup, b.event_timestamp, "
    "c.amount_paid_by_cash FROM data_stream_0 AS b JOIN data_stream_1 AS c ON b.order_number = c.order_number "
    "AND b.event_timestamp = c.event_timestamp "
    "AND b.rowtime BETWEEN c.rowtime - INTERVAL '1' MINUTE AND c.rowtime + INTERVAL '1' MINUTE"
)
JOIN_RECORDS = int(os.environ.get("BENCH_JOIN_RECORDS", "200000"))  # the join's input (read twice)
#: records/s fed to the join's latency runs (each read twice, and held in state for a minute either way)
JOIN_LATENCY_RATE = float(os.environ.get("BENCH_JOIN_LATENCY_RATE", "5000"))
# the window job of the latency runs: 10-second windows, so a minute's measurement sees six of them close
LATENCY_WINDOW_SQL = WINDOW_SQL.replace("INTERVAL '1' MINUTE", "INTERVAL '10' SECOND")
LATENCY_WINDOW_SPARK_SQL = WINDOW_SPARK_SQL.replace("'1 minute'", "'10 seconds'")
# BENCH_SPARK_CONF="key=value;key=value": Spark settings of an experiment, every job's SPARK_CONF
SPARK_CONF = dict(kv.split("=", 1) for kv in filter(None, os.environ.get("BENCH_SPARK_CONF", "").split(";")))
# BENCH_JOB_CONF='{"KEY": "value"}': job settings of an experiment, added to every job of ours
JOB_CONF = json.loads(os.environ.get("BENCH_JOB_CONF", "{}"))
#: the stateless workload on Spark's own Kafka source and sink (raw PySpark in the benchmark's session)
SPARK_KAFKA_PARTS = ("stateless_spark", "stateless_json_spark", "window_spark", "join_spark", "stateless_spark_floor")
#: the real-time trigger's interval: a checkpoint interval, not a latency (Spark's minimum is 5 s); by default the
#: job's (SPARK_REALTIME_CHECKPOINT_INTERVAL_MS)
REALTIME_CHECKPOINT_MS = int(os.environ.get("BENCH_REALTIME_CHECKPOINT_MS") or 0) or None
#: seconds measured in real-time mode: several checkpoint intervals, so that p99 holds as many of their pauses as a
#: long run does
REALTIME_SECONDS = float(os.environ.get("BENCH_REALTIME_SECONDS", "240"))
THROUGHPUT = (
    "baseline",
    "stateless",
    "stateless_ptars",
    "stateless_dagger_jvm",
    "stateless_spark_jvm",
    "stateless_avro",
    "stateless_avro_spark",
    "stateless_spark",
    "stateless_spark_floor",
    "stateless_json",
    "stateless_json_out",
    "stateless_json_spark",
    "window",
    "window_spark",
    "join",
    "join_spark",
    "bytewax",
    "quix",
    "flink",
    "flink_window",
)


def job_config(
    bootstrap: str, descriptors: str, source: str, sink: str, sql: str, message: str, json_schema: dict | None = None
) -> dict:
    """A Dagger job over ``source`` writing ``message`` records to ``sink``, with the defaults the README gives;
    with ``json_schema`` the input records are JSON objects of that schema."""
    data = {
        "FLINK_JOB_ID": f"bench-{uuid.uuid4().hex[:6]}",
        "FLINK_SQL_QUERY": sql,
        "FLINK_WATERMARK_DELAY_MS": str(WATERMARK_DELAY_MS),
        "FLINK_ROWTIME_ATTRIBUTE_NAME": "rowtime",
        "STREAMS": [
            {
                "SOURCE_KAFKA_TOPIC_NAMES": source,
                "INPUT_SCHEMA_TABLE": "data_stream_0",
                "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
                "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
                "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": bootstrap,
                "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earliest",
                "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": f"bench-{uuid.uuid4().hex[:6]}",
                "SOURCE_DETAILS": [{"SOURCE_TYPE": "UNBOUNDED", "SOURCE_NAME": "KAFKA_CONSUMER"}],
            }
        ],
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": bootstrap,
        "SINK_KAFKA_TOPIC": sink,
        "SINK_KAFKA_PROTO_MESSAGE": message,
        "SCHEMA_REGISTRY_STENCIL_URLS": descriptors,
        "SPARK_MASTER": f"local[{CORES}]",
        "METRIC_TELEMETRY_ENABLE": "false",
        "SPARK_CONF": dict(SPARK_CONF),
        **JOB_CONF,
    }
    if json_schema is not None:
        stream = data["STREAMS"][0]
        del stream["INPUT_SCHEMA_PROTO_CLASS"], stream["INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"]
        stream["INPUT_DATATYPE"] = "JSON"
        stream["INPUT_SCHEMA_JSON_SCHEMA"] = json.dumps(json_schema)
        stream["INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME"] = "event_timestamp"
    return data


def _progress_breakdown(progress: list[dict]) -> tuple[dict[str, float], float]:
    """Milliseconds per micro-batch of each phase (``batch_seconds``: the whole batch, as the job's metrics name
    it), and micro-batches per second, over Spark's recent progress of a query (batches that read nothing left
    out: Spark runs them only when no data waits)."""
    busy = [p for p in progress if p["durationMs"].get("addBatch") is not None]
    if len(busy) < 2:
        return {}, 0.0
    phases: dict[str, float] = {}
    for p in busy:
        for key, ms in p["durationMs"].items():
            phases[key] = phases.get(key, 0.0) + ms
    out = {k: round(v / len(busy), 1) for k, v in sorted(phases.items())}
    out["batch_seconds"] = out.get("triggerExecution", 0.0)
    stamps = [dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() for p in busy]
    span = max(stamps) - min(stamps)
    return out, (len(busy) - 1) / span if span > 0 else 0.0


def _realtime_interval_ms() -> int:
    """The real-time parts' checkpoint interval: ``BENCH_REALTIME_CHECKPOINT_MS``, else the job's default."""
    from dagger.config.model import JobConfig

    return REALTIME_CHECKPOINT_MS or JobConfig.model_fields["SPARK_REALTIME_CHECKPOINT_INTERVAL_MS"].default


def _flink_version() -> str:
    """The PyFlink version the Flink peer runs (``bench/peers/flink_setup.py`` pins it)."""
    sys.path.insert(0, str(PEERS))
    from flink_setup import FLINK

    return FLINK


def output_start(bootstrap: str, topic: str) -> float | None:
    """Produce time in seconds of the earliest record of ``topic`` (each partition's first; None: empty)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        firsts = []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                consumer.assign([TopicPartition(topic, p, low)])
                message = None
                for _ in range(12):  # a minute at most
                    message = consumer.poll(5)
                    if message is not None and not message.error():
                        firsts.append(message.timestamp()[1] / 1000)
                        break
        return min(firsts, default=None)
    finally:
        consumer.close()


def output_end(bootstrap: str, topic: str) -> tuple[int, float | None]:
    """(records in ``topic``, produce time in seconds of its last record) read through the fetch path."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-end-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    count, last = 0, None
    for partition in metadata.partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, max(high - 1, 0))])
        end = high
        while True:
            batch = consumer.consume(10000, timeout=1)
            if not batch:
                break
            done = False
            for m in batch:
                if m.error() is None:
                    end = m.offset() + 1
                    stamp = m.timestamp()[1] / 1000
                    last = stamp if last is None else max(last, stamp)
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done = True
            if done:
                break
        count += end
    consumer.close()
    return count, last


class Bench:
    """One broker, one input topic, and the measurements."""

    def __init__(self, broker, stencil_url: str):  # noqa: ANN001
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.descriptors = stencil_url
        self.input = f"bench-in-{uuid.uuid4().hex[:6]}"
        self.input_json = f"bench-in-json-{uuid.uuid4().hex[:6]}"  # the same records as JSON objects
        self.input_join = f"bench-in-join-{uuid.uuid4().hex[:6]}"  # the join's input (JOIN_RECORDS)
        self.input_avro = f"bench-in-avro-{uuid.uuid4().hex[:6]}"  # the same records as Confluent Avro
        self.registry = None  # the test registry of the Avro part
        #: part → CPU seconds (user + system, from /proc) of each of its runs, of the processes that ran it
        self.cpu_seconds: dict[str, list[float]] = {}
        self.json_schema: dict | None = None
        self.spark = None
        self.results: dict = {}
        self.expected: dict[str, int] = {}  # part -> the output records a complete run writes
        self.startups: dict[str, list[float]] = {}  # part -> seconds from launch to the first output, per run

    def topic(self, name: str, partitions: int = CORES) -> str:
        topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        self.broker.create_topic(topic, partitions)
        return topic

    def generate(self) -> None:
        import pyarrow.compute as pc

        from dagger.generate import RecordGenerator, produce_generated

        self.broker.create_topic(self.input, CORES)
        generator = RecordGenerator(self.booking(), seed=0, start=START, events_per_second=EVENTS_PER_SECOND)
        kept = 0
        arrow = generator.arrow

        def counted(n: int):  # noqa: ANN202 - the records the stateless filter keeps, counted as they are made
            nonlocal kept
            batch = arrow(n)
            kept += pc.sum(pc.less(batch.column("amount_paid_by_cash"), 500)).as_py() or 0
            return batch

        generator.arrow = counted
        began = time.monotonic()
        produce_generated(generator, self.bootstrap, self.input, RECORDS)
        print(
            f"[bench] generated {RECORDS:,} records ({kept:,} pass the stateless filter)"
            f" in {time.monotonic() - began:.1f} s",
            flush=True,
        )
        self.expected = {
            "baseline": RECORDS,
            "stateless": kept,
            "stateless_ptars": kept,
            "stateless_dagger_jvm": kept,
            "stateless_spark_jvm": kept,
            "stateless_spark": kept,
            "stateless_spark_floor": RECORDS,
            "bytewax": kept,
            "quix": kept,
            "flink": kept,
        }
        if any(p.startswith("join") for p in PARTS):
            self.broker.create_topic(self.input_join, CORES)
            joined = RecordGenerator(self.booking(), seed=0, start=START, events_per_second=EVENTS_PER_SECOND)
            produce_generated(joined, self.bootstrap, self.input_join, JOIN_RECORDS)
            self.expected.update(join=JOIN_RECORDS, join_spark=JOIN_RECORDS)
        if any(p.startswith("stateless_json") for p in PARTS):
            self.broker.create_topic(self.input_json, CORES)
            as_json = RecordGenerator(
                self.booking(), seed=0, start=START, events_per_second=EVENTS_PER_SECOND, data_type="JSON"
            )
            self.json_schema = as_json.json_schema()
            produce_generated(as_json, self.bootstrap, self.input_json, RECORDS)
            self.expected.update(stateless_json=kept, stateless_json_out=kept, stateless_json_spark=kept)
            print(f"[bench] the same {RECORDS:,} records as JSON in {self.input_json}", flush=True)
        if "stateless_avro" in PARTS or "stateless_avro_spark" in PARTS:
            began = time.monotonic()
            self.avro_input()
            self.expected.update(stateless_avro=kept, stateless_avro_spark=kept)
            print(
                f"[bench] the same {RECORDS:,} records as Confluent Avro in {self.input_avro}"
                f" in {time.monotonic() - began:.1f} s",
                flush=True,
            )

    def avro_input(self) -> None:
        """The measured records again, as Avro in Confluent's wire format: generated as for the protobuf input (the
        same seed), encoded by Spark's ``to_avro`` behind the header, written by Spark's Kafka sink; the schema is
        the one the Avro sink derives from the records' columns, registered in the test registry."""
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro

        from dagger.formats.avro.encode import derived_schema
        from dagger.generate import RecordGenerator
        from testing.schema_registry import SchemaRegistry

        self.registry = SchemaRegistry().start()
        self.broker.create_topic(self.input_avro, CORES)
        generator = RecordGenerator(self.booking(), seed=0, start=START, events_per_second=EVENTS_PER_SECOND)
        spark = self.session()
        schema = None
        header = None
        left = RECORDS
        while left:
            n = min(left, 200_000)
            left -= n
            # in produce_generated's batches of 10,000: the same draws, so the same records as the protobuf input
            parts = [generator.arrow(min(10_000, n - i)) for i in range(0, n, 10_000)]
            batch = pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
            if schema is None:
                schema = derived_schema(batch.schema, "bench.Booking")
                schema_id = self.registry.register(f"{self.input_avro}-value", schema)
                header = b"\0" + schema_id.to_bytes(4, "big")
            df = spark.createDataFrame(pa.Table.from_batches([batch]))
            value = F.concat(F.lit(header), to_avro(F.struct(*[F.col(f"`{c}`") for c in df.columns]), schema))
            df.select(value.alias("value")).write.format("kafka").option(
                "kafka.bootstrap.servers", self.bootstrap
            ).option("topic", self.input_avro).save()

    # -- processes (baseline, peers) ----------------------------------------------------------------------

    def processes(self, name: str, commands: list[list[str]], python: str, **settings: str) -> float:
        """Launch ``commands`` together (``settings``: more environment), wait for all; input records / (last
        output - launch)."""
        out = self.topic(name)
        env = dict(
            os.environ,
            BENCH_BOOTSTRAP=self.bootstrap,
            BENCH_INPUT=self.input,
            BENCH_OUTPUT=out,
            BENCH_DESCRIPTORS=str(ROOT / "descriptors" / "examples.desc"),
            BENCH_GROUP=f"{name}-{uuid.uuid4().hex[:8]}",
            **settings,
        )
        from testing import proctree

        launched = time.time()
        running = [
            subprocess.Popen([python, *c], env=env, cwd=PEERS, stderr=subprocess.PIPE, text=True) for c in commands
        ]
        # the CPU seconds of the processes and everything they start (a JVM a PyFlink process starts is not
        # waited for by it, so not in anyone's children times): each process's own, sampled until it ends
        cpu = proctree.CpuSampler([p.pid for p in running])
        cpu.start()
        try:
            for p in running:
                _, err = p.communicate(timeout=3600)
                if p.returncode != 0:
                    raise RuntimeError(f"{name} process {p.args} failed ({p.returncode}): {err[-2000:]}")
        finally:
            cpu.stop()
        self.cpu_seconds.setdefault(name, []).append(cpu.seconds)
        return self.finish(name, out, launched)

    def session_cpu(self) -> float:
        """User + system CPU seconds used so far by this process's tree (the driver, Spark's JVM, its Python
        workers) without the services it runs for the bench (the broker): what a job in the shared session used,
        taken before and after its run. Peers' processes, once reaped, are in its children's times, so a run of ours
        is measured between two readings with no peer running."""
        from testing import proctree

        services = set()
        if self.broker.process is not None:
            services.update(proctree.tree(self.broker.process.pid))
        return proctree.cpu_seconds(os.getpid(), skip=services)

    def finish(self, name: str, out: str, launched: float, records: int = RECORDS) -> float:
        """Measure one run from its output topic, then delete the topic (the broker keeps the same data for
        every run and part). A run that wrote fewer or more records than a complete one fails: its rate
        would not be the rate of the whole workload."""
        count, last = output_end(self.bootstrap, out)
        first = output_start(self.bootstrap, out)
        self.broker.delete_topic(out)
        if last is None:
            raise RuntimeError(f"{name} wrote nothing to {out}")
        expected = self.expected.get(name)
        if expected is not None and count != expected:
            raise RuntimeError(f"{name} wrote {count:,} records, a complete run writes {expected:,}")
        rate = records / (last - launched)
        first = first if first is not None else last
        self.startups.setdefault(name, []).append(first - launched)
        print(
            f"[bench] {name}: {count:,} output records, {rate:,.0f} input records/s, first output after "
            f"{first - launched:.1f} s",
            flush=True,
        )
        return rate

    def baseline(self) -> float:
        return self.processes("baseline", [["copy_loop.py", str(p)] for p in range(CORES)], sys.executable)

    def quix(self) -> float:
        # each process stops after 60 s without new input (Quix's run timeout): with 15 s, a tiny run in make
        # test-long, beside a worker building the image, ended with no output ("quix wrote nothing"). The rate ends
        # at the last output record, so the wait after it is not measured.
        return self.processes("quix", [["quix_app.py", "60"] for _ in range(CORES)], PEERS_PYTHON)

    def bytewax(self) -> float:
        from testing.broker import free_port

        addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(CORES))
        commands = [["-m", "bytewax.run", "bytewax_flow:flow", "-i", str(i), "-a", addresses] for i in range(CORES)]
        return self.processes("bytewax", commands, PEERS_PYTHON)

    def flink(self) -> float:
        """The stateless job on Flink SQL (``bench/peers/flink_job.py``: one PyFlink process, parallelism 2)."""
        return self.processes("flink", [["flink_job.py"]], FLINK_PYTHON, BENCH_FLINK_JOB="stateless")

    def flink_window(self) -> float:
        """The 1-minute window job on Flink SQL."""
        return self.processes("flink_window", [["flink_job.py"]], FLINK_PYTHON, BENCH_FLINK_JOB="window")

    # -- our jobs, in one warmed-up session ---------------------------------------------------------------

    def session(self):  # noqa: ANN201
        if self.spark is None:
            from dagger.job import load_config
            from dagger.session.spark import get_session

            config = load_config(data=self._job("warmup", STATELESS_SQL, "dagger.examples.BookingSummaryMessage"))
            self.spark = get_session(config)
        return self.spark

    def _job(self, out: str, sql: str, message: str, source: str | None = None, as_json: bool = False) -> dict:
        schema = self.json_schema if as_json else None
        return job_config(self.bootstrap, self.descriptors, source or self.input, out, sql, message, schema)

    def dagger(self, name: str, sql: str, message: str, source: str | None = None) -> float:
        """One run of a job over ``source`` (the measured input by default) in the shared session."""
        from dagger.job import Job, load_config

        spark = self.session()
        out = self.topic(name)
        checkpoint = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
        as_json = name.startswith("stateless_json")
        as_avro = name.startswith("stateless_avro")
        own = self.input_json if as_json else self.input_avro if as_avro else None
        data = self._job(out, sql, message, source or own, as_json)
        if as_avro:
            stream = data["STREAMS"][0]
            del stream["INPUT_SCHEMA_PROTO_CLASS"], stream["INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"]
            stream.update(
                INPUT_DATATYPE="AVRO",
                INPUT_SCHEMA_WIRE_FORMAT="confluent",
                INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
            )
            data["SCHEMA_REGISTRY_CONFLUENT_URL"] = self.registry.url
        if name.startswith("stateless_json_out"):
            del data["SINK_KAFKA_PROTO_MESSAGE"]
            data["SINK_KAFKA_DATA_TYPE"] = "JSON"
        data.update(PART_SETTINGS.get(name.removesuffix("-warmup"), {}))
        manager = Job(load_config(data=data), checkpoint_dir=str(checkpoint), available_now=True, spark=spark)
        # the _spark variant plans the job as a session without Dagger's JVM classes does: from_avro decodes
        spark_decodes = mock.patch("dagger.formats.avro.decode.jvm_rows", return_value=None)
        used = self.session_cpu()
        launched = time.time()
        with spark_decodes if name.startswith("stateless_avro_spark") else contextlib.nullcontext():
            query = manager.start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{name} job failed: {query.exception()}")
        self.cpu_seconds.setdefault(name, []).append(self.session_cpu() - used)
        return self.finish(name, out, launched)

    def warm_up(self, part: str) -> None:
        """Unmeasured runs of one of our jobs (``BENCH_WARMUP_RUNS``) before its measured ones."""
        from dagger.generate import RecordGenerator, produce_generated

        if part in SPARK_KAFKA_PARTS or part == "join":
            for _ in range(WARMUP_RUNS):
                print(f"[bench] {part}: warm-up run", flush=True)
                getattr(self, part)()
            return
        source = None  # by default over the measured input itself
        if WARMUP_RECORDS and not part.startswith(("stateless_json", "stateless_avro")):
            source = self.topic("warm")
            generator = RecordGenerator(self.booking(), start=START, events_per_second=EVENTS_PER_SECOND)
            produce_generated(generator, self.bootstrap, source, WARMUP_RECORDS)
        sql, message = JOBS[part]
        for _ in range(WARMUP_RUNS):
            print(f"[bench] {part}: warm-up run", flush=True)
            self.dagger(part if source is None else f"{part}-warmup", sql, message, source)

    def stateless(self) -> float:
        return self.dagger("stateless", *JOBS["stateless"])

    def stateless_ptars(self) -> float:
        return self.dagger("stateless_ptars", *JOBS["stateless_ptars"])

    def stateless_dagger_jvm(self) -> float:
        return self.dagger("stateless_dagger_jvm", *JOBS["stateless_dagger_jvm"])

    def stateless_spark_jvm(self) -> float:
        return self.dagger("stateless_spark_jvm", *JOBS["stateless_spark_jvm"])

    def stateless_avro(self) -> float:
        return self.dagger("stateless_avro", *JOBS["stateless_avro"])

    def stateless_avro_spark(self) -> float:
        return self.dagger("stateless_avro_spark", *JOBS["stateless_avro_spark"])

    def stateless_json(self) -> float:
        return self.dagger("stateless_json", *JOBS["stateless_json"])

    def stateless_json_out(self) -> float:
        return self.dagger("stateless_json_out", *JOBS["stateless_json_out"])

    def window(self) -> float:
        return self.dagger("window", *JOBS["window"])

    def join(self) -> float:
        """The interval join as a Dagger job: two streams over the join's input, its SQL as Dagger users write it."""
        from dagger.job import Job, load_config

        spark = self.session()
        out = self.topic("join")
        data = self._job(out, JOIN_SQL, "dagger.examples.BookingSummaryMessage", self.input_join)
        other = dict(data["STREAMS"][0], INPUT_SCHEMA_TABLE="data_stream_1")
        other["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"] += "-1"
        data["STREAMS"].append(other)
        checkpoint = tempfile.mkdtemp(prefix="bench-join-")
        manager = Job(load_config(data=data), checkpoint_dir=checkpoint, available_now=True, spark=spark)
        launched = time.time()
        query = manager.start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"join job failed: {query.exception()}")
        return self.finish("join", out, launched, JOIN_RECORDS)

    # -- the same workload on Spark's own Kafka connector ---------------------------------------------------

    def stateless_spark(self) -> float:
        return self.spark_kafka("stateless_spark", as_json=False)

    def stateless_spark_floor(self) -> float:
        """Spark's throughput floor: each record's value copied from Spark's Kafka source to its sink, no decoding
        and no SQL (``bench/spark_kafka.py``'s ``copy_query``, ``availableNow``, in the benchmark's session)."""
        from bench.spark_kafka import copy_query

        out = self.topic("stateless_spark_floor")
        checkpoint = tempfile.mkdtemp(prefix="bench-stateless_spark_floor-")
        launched = time.time()
        query = copy_query(self.session(), self.bootstrap, self.input, out, checkpoint, available_now=True)
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"stateless_spark_floor failed: {query.exception()}")
        return self.finish("stateless_spark_floor", out, launched)

    def stateless_json_spark(self) -> float:
        return self.spark_kafka("stateless_json_spark", as_json=True)

    def window_spark(self) -> float:
        return self.spark_kafka(
            "window_spark", False, WINDOW_SPARK_SQL, "dagger.examples.BookingCountMessage", watermark=True
        )

    def join_spark(self) -> float:
        return self.spark_kafka(
            "join_spark",
            False,
            JOIN_SQL,
            "dagger.examples.BookingSummaryMessage",
            watermark=True,
            tables=("data_stream_0", "data_stream_1"),
        )

    def spark_kafka(
        self,
        name: str,
        as_json: bool,
        sql: str = STATELESS_SQL,
        message: str = "dagger.examples.BookingSummaryMessage",
        watermark: bool = False,
        tables: tuple[str, ...] = ("data_stream_0",),
    ) -> float:
        """One ``availableNow`` run of ``sql`` between Spark's Kafka source and sink (``watermark``: each table's
        rowtime gets the jobs' watermark delay; two ``tables`` read the join's input)."""
        from bench.spark_kafka import stateless_query

        spark = self.session()
        out = self.topic(name)
        checkpoint = tempfile.mkdtemp(prefix=f"bench-{name}-")
        descriptors = (ROOT / "descriptors" / "examples.desc").read_bytes()
        joined = len(tables) > 1
        source = self.input_join if joined else self.input_json if as_json else self.input
        launched = time.time()
        query = stateless_query(
            spark,
            self.bootstrap,
            source,
            out,
            sql,
            checkpoint,
            descriptors=None if as_json else descriptors,
            json_schema=self.json_schema if as_json else None,
            message=message,
            tables=tables,
            watermark=f"{WATERMARK_DELAY_MS} milliseconds" if watermark else None,
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{name} failed: {query.exception()}")
        return self.finish(name, out, launched, JOIN_RECORDS if joined else RECORDS)

    # -- latency, start-up and memory of `dagger run` ----------------------------------------------------

    def latency(self) -> dict:
        """The stateless job under a steady load: latency from each input record's produce time to its output's."""
        return self._latency_run(
            "latency", STATELESS_SQL, "dagger.examples.BookingSummaryMessage", EVENTS_PER_SECOND, _latencies, True
        )

    def latency_flink(self) -> dict:
        """The stateless job on Flink SQL (unbounded, Flink's defaults) under the same load: latency, start-up and
        memory, as for ``dagger run``."""
        return self._latency_run(
            "latency_flink",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            peer="flink",
        )

    def latency_window(self) -> dict:
        """The window job (10-second windows, event time running at wall-clock pace) under the same load: latency
        from the input record that closes a window (its event time passes the window's end plus the watermark
        delay) to each of the window's output rows, i.e. beyond the window's own wait."""
        return self._latency_run(
            "latency_window",
            LATENCY_WINDOW_SQL,
            "dagger.examples.BookingCountMessage",
            LATENCY_RATE,
            _window_latencies,
            drain=False,  # the last windows need input after the measured window to close
        )

    def latency_spark(self) -> dict:
        """The stateless job on Spark's Kafka source and sink (ptars in ``mapInArrow``, micro-batches, the same
        session settings as ``dagger run``) under the same load: latency, start-up and memory."""
        return self._latency_run(
            "latency_spark",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            spark_sql=STATELESS_SQL,
        )

    def latency_window_spark(self) -> dict:
        """The 10-second window job on Spark's Kafka source and sink, Spark's window(): as ``latency_window``."""
        return self._latency_run(
            "latency_window_spark",
            LATENCY_WINDOW_SQL,
            "dagger.examples.BookingCountMessage",
            LATENCY_RATE,
            _window_latencies,
            drain=False,
            spark_sql=LATENCY_WINDOW_SPARK_SQL,
            watermark=True,
        )

    def latency_join(self) -> dict:
        """The interval join (two streams over one topic, each record meets itself) as ``dagger run`` under
        ``BENCH_JOIN_LATENCY_RATE``: latency from each input's produce time to its joined row's."""
        return self._latency_run(
            "latency_join",
            JOIN_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            streams=2,
            rate=JOIN_LATENCY_RATE,
        )

    def latency_join_spark(self) -> dict:
        """The interval join on Spark's Kafka source and sink: as ``latency_join``."""
        return self._latency_run(
            "latency_join_spark",
            JOIN_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            spark_sql=JOIN_SQL,
            watermark=True,
            streams=2,
            rate=JOIN_LATENCY_RATE,
        )

    def latency_realtime(self) -> dict:
        """``dagger run --real-time`` of the stateless workload, JSON in and JSON out (Spark's Kafka source and
        sink, no Python at run time), under the same load: latency from each input's produce time to its output's,
        records lost, start-up and memory of its processes."""
        return self._latency_run(
            "latency_realtime", STATELESS_SQL, "", EVENTS_PER_SECOND, _json_latencies, True, real_time=True
        )

    def latency_ptars(self) -> dict:
        """``latency`` as the job ran before issue 53: protobuf decoded and encoded by ptars in Python workers, read
        and written by Dagger's Kafka reader and writer (``SPARK_PROTOBUF_CODEC=ptars``,
        ``SPARK_KAFKA_CONNECTOR=dagger``)."""
        return self._latency_run(
            "latency_ptars",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            settings={"SPARK_PROTOBUF_CODEC": "ptars", "SPARK_KAFKA_CONNECTOR": "dagger"},
        )

    def latency_dagger_jvm(self) -> dict:
        """``latency`` on Dagger's Kafka reader and writer with protobuf decoded and encoded in the JVM (the reader
        hands the values over): ``SPARK_PROTOBUF_CODEC=jvm``, ``SPARK_KAFKA_CONNECTOR=dagger``."""
        return self._latency_run(
            "latency_dagger_jvm",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            settings={"SPARK_PROTOBUF_CODEC": "jvm", "SPARK_KAFKA_CONNECTOR": "dagger"},
        )

    def latency_spark_jvm(self) -> dict:
        """``latency`` on Spark's Kafka source and sink with protobuf decoded and encoded in the JVM, no Python worker
        on the records' way: ``SPARK_KAFKA_CONNECTOR=spark``."""
        return self._latency_run(
            "latency_spark_jvm",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            settings={"SPARK_KAFKA_CONNECTOR": "spark"},
        )

    def latency_spark_floor(self) -> dict:
        """Spark's own micro-batch floor on this workload, nothing of Dagger's in the query or the session: each
        record's value copied from Spark's Kafka source to its sink (no decoding, no SQL), Spark's default trigger
        and settings (``bench/spark_kafka.py --bare``)."""
        return self._spark_floor("latency_spark_floor")

    def latency_spark_floor_async(self) -> dict:
        """``latency_spark_floor`` with the sink's asynchronous progress tracking (``asyncProgressTrackingEnabled``:
        the offset and commit logs written beside the next micro-batch instead of before and after it)."""
        return self._spark_floor("latency_spark_floor_async", "--async-progress")

    def _spark_floor(self, name: str, *args: str) -> dict:
        return self._latency_run(
            name,
            STATELESS_SQL,  # the job config's, unused: `--bare` copies the values
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _copied_latencies,
            True,
            spark_sql="-",
            spark_args=("--bare", *args),
        )

    def latency_realtime_proto(self) -> dict:
        """``dagger run --real-time`` of the stateless workload, protobuf in and protobuf out (Dagger's codec in the
        JVM, Spark's Kafka source and sink), under the same load: as ``latency_realtime``."""
        return self._latency_run(
            "latency_realtime_proto",
            STATELESS_SQL,
            "dagger.examples.BookingSummaryMessage",
            EVENTS_PER_SECOND,
            _latencies,
            True,
            real_time=True,
            json_records=False,
        )

    def longbow(self) -> dict:
        """``bench/longbow.py`` as a process of its own, its results into the same directory."""
        env = dict(
            os.environ, BENCH_RESULTS_DIR=str(RESULTS), BENCH_LONGBOW_RUNS=os.environ.get("BENCH_LONGBOW_RUNS", "3")
        )
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "longbow.py")],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            timeout=3600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"bench/longbow.py failed ({done.returncode}): {done.stderr[-2000:]}")
        return json.loads((RESULTS / "longbow.json").read_text())

    def _latency_run(
        self,
        name: str,
        sql: str,
        message: str,
        events_per_second: float,
        measure,  # noqa: ANN001
        drain: bool,
        real_time: bool = False,
        peer: str | None = None,
        spark_sql: str | None = None,
        watermark: bool = False,
        streams: int = 1,
        rate: float = LATENCY_RATE,
        json_records: bool | None = None,
        settings: dict[str, str] | None = None,
        spark_args: tuple[str, ...] = (),
    ) -> dict:
        """Launch ``dagger run`` of ``sql`` and feed it at a steady rate; ``measure(bootstrap, source, out, begin,
        end)`` gives the latencies of the records fed from ``BENCH_WARMUP_SECONDS`` after its first output for
        ``BENCH_LATENCY_SECONDS`` (``BENCH_REALTIME_SECONDS`` in real-time mode); also the job's start-up, memory
        and where a micro-batch's time goes.

        ``drain``: after the feed, wait until every record the job should write is written (else a few batches).
        ``real_time``: JSON records in and out, ``dagger run --real-time`` (checkpoint interval
        ``BENCH_REALTIME_CHECKPOINT_MS``, by default the job's); ``json_records`` (default: ``real_time``) JSON records
        in and out, else protobuf. ``settings``: job config keys over the defaults. ``peer``: the same work run by another program
        instead of ``dagger run``: ``flink`` (``bench/peers/flink_job.py``; no job metrics, so no micro-batch
        breakdown). ``spark_sql``: instead of ``dagger run``, this SQL as Spark writes it on Spark's Kafka source and
        sink (``bench/spark_kafka.py``, in the session ``dagger run`` starts; its breakdown from Spark's recent
        progress), with the job's watermark on each table if ``watermark``. ``streams``: 2 reads the input as two
        streams (the join), each record meeting itself. ``rate``: records/s fed."""
        from dagger.generate import RecordGenerator, produce_generated
        from dagger.session import class_data as jvm_classes
        from testing import proctree
        from testing.broker import free_port
        from testing.job_metrics import per_batch_ms, scrape

        seconds = REALTIME_SECONDS if real_time else LATENCY_SECONDS
        as_json = real_time if json_records is None else json_records
        ours = peer is None and spark_sql is None  # dagger run: its metrics endpoint gives the batch breakdown
        source, out = self.topic(f"{name}-in", LATENCY_PARTITIONS), self.topic(f"{name}-out")
        job = Path(tempfile.mkdtemp(prefix=f"bench-{name}-")) / "job.json"
        port = free_port()  # the job's own metrics: where a micro-batch's time goes (Spark's durationMs)
        generator = RecordGenerator(
            self.booking(),
            seed=2 if as_json else 1,
            start=START,
            events_per_second=events_per_second,
            data_type="JSON" if as_json else "PROTO",
        )
        data = job_config(
            self.bootstrap, self.descriptors, source, out, sql, message, generator.json_schema() if as_json else None
        )
        if as_json:
            del data["SINK_KAFKA_PROTO_MESSAGE"]
            data.update(SINK_KAFKA_DATA_TYPE="JSON")
        if real_time:  # `dagger run` starts local[N] when the topic has more partitions than cores
            data.pop("SPARK_MASTER", None)
        if real_time and REALTIME_CHECKPOINT_MS:
            data.update(SPARK_REALTIME_CHECKPOINT_INTERVAL_MS=str(REALTIME_CHECKPOINT_MS))
        data.update(settings or {})
        if streams == 2:  # the join: a second stream over the same topic, in a group of its own
            other = dict(data["STREAMS"][0], INPUT_SCHEMA_TABLE="data_stream_1")
            other["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"] += "-1"
            data["STREAMS"].append(other)
        job.write_text(json.dumps({**data, "METRIC_TELEMETRY_ENABLE": "true", "METRIC_PROMETHEUS_PORT": str(port)}))
        scrapes: dict[str, dict[str, float]] = {}
        window: dict[str, float] = {}
        stopped = threading.Event()
        feeding = threading.Thread(
            target=produce_generated,
            args=(generator, self.bootstrap, source, 0),
            kwargs={"rate": rate, "stop": stopped.is_set},
        )
        command = [sys.executable, "-m", "dagger", "run", str(job), "--checkpoint-dir", str(job.parent / "cp")]
        command += ["--real-time"] if real_time else []
        env = None
        if spark_sql is not None:
            command = [sys.executable, str(ROOT / "bench" / "spark_kafka.py"), str(job), spark_sql]
            command += ["--tables", str(streams)] + (["--watermark"] if watermark else []) + list(spark_args)
        elif peer == "flink":
            command = [FLINK_PYTHON, str(PEERS / "flink_job.py")]
            env = dict(
                os.environ,
                BENCH_BOOTSTRAP=self.bootstrap,
                BENCH_INPUT=source,
                BENCH_OUTPUT=out,
                BENCH_FLINK_BOUNDED="0",
            )
        from dagger.session import jars as session_jars

        # the archive of the session's class path (the connectors' jars), as the session names it
        class_path = session_jars.session_settings().get("spark.driver.extraClassPath", "")
        archive = jvm_classes.archive_path(class_path)
        # warm: start-up maps Spark's classes (a session of ours; not Flink's, nor Spark's bare one)
        archived = archive is not None and archive.exists() and peer is None and "--bare" not in spark_args
        launched = time.time()
        log_path = job.parent / "job.log"  # a file, not a pipe: a pipe nobody reads would stall the job's logging
        log_file = log_path.open("w")
        process = subprocess.Popen(command, cwd=ROOT, stdout=log_file, stderr=log_file, text=True, env=env)
        print(f"[bench] {name}: the job logs to {log_path}", flush=True)
        feeding.start()
        memory = proctree.PeakMemory(process.pid)
        first_output = FirstOutput(self.bootstrap, out)
        try:
            while "end" not in window or time.time() < window["end"]:
                memory.sample()
                if "first_output" not in window:
                    first = first_output.look()
                    if first is not None:
                        window.update(first_output=first, begin=first + WARMUP_SECONDS)
                        window["end"] = window["begin"] + seconds
                elif "begin" not in scrapes and time.time() >= window["begin"] and ours:
                    scrapes["begin"] = scrape(port)
                if process.poll() is not None:
                    raise RuntimeError(f"dagger run exited with {process.returncode}: {log_path.read_text()[-2000:]}")
                if time.time() - launched > WARMUP_SECONDS + seconds + 300:
                    raise RuntimeError(f"the {name} run did not start in time")
                time.sleep(0.5)
            if ours:
                scrapes["end"] = scrape(port)
            stopped.set()
            feeding.join()
            print(f"[bench] {name}: fed until {time.time() - launched:.0f} s after launch", flush=True)
            expected = None
            if drain:
                if streams == 2 or "--bare" in spark_args:  # each input meets itself / is copied: one row each
                    expected = output_end(self.bootstrap, source)[0]
                else:
                    expected = (_expected_json_outputs if as_json else _expected_outputs)(self.bootstrap, source)
                deadline = time.time() + 60  # let the job write the last records
                while time.time() < deadline and output_end(self.bootstrap, out)[0] < expected:
                    memory.sample()
                    time.sleep(1)
            else:
                time.sleep(5)  # windows closed by the last records fed are written within a few micro-batches
        finally:
            first_output.close()
            stopped.set()
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
            log_file.close()
        print(f"[bench] {name}: job stopped {time.time() - launched:.0f} s after launch", flush=True)
        timed = measure(self.bootstrap, source, out, window["begin"], window["end"])
        latencies = [ms for _, ms in timed]
        if not latencies:
            raise RuntimeError(f"{name}: no output of the records fed in the measured window; see {log_path}")
        breakdown = per_batch_ms(scrapes.get("begin", {}), scrapes.get("end", {}))
        batches_per_s = (
            scrapes.get("end", {}).get("batches", 0) - scrapes.get("begin", {}).get("batches", 0)
        ) / seconds
        if (job.parent / "progress.json").exists():  # bench/spark_kafka.py: its last micro-batches
            breakdown, batches_per_s = _progress_breakdown(json.loads((job.parent / "progress.json").read_text()))
        _plot_latency(timed, window["begin"], RESULTS / f"{name}.png", name)
        written = output_end(self.bootstrap, out)[0]
        return {
            "rate": rate,
            **({"checkpoint_interval_ms": _realtime_interval_ms()} if real_time else {}),
            **(
                {"inputs_kept": expected, "outputs": written, "lost": max(0, expected - written)}
                | ({"extra": written - expected} if written > expected else {})
                if drain
                else {}
            ),
            "measured_seconds": seconds,
            "measured_records": len(latencies),
            "batches_per_s": round(batches_per_s, 2),
            "batch_breakdown_ms": breakdown,
            "p50_ms": round(_percentile(latencies, 50)),
            "p99_ms": round(_percentile(latencies, 99)),
            "worst_60s_p99_ms": _worst_window_p99(timed, 60.0),
            "partitions": LATENCY_PARTITIONS,
            "format": "JSON" if as_json else "protobuf",
            **({"settings": settings} if settings else {}),
            "max_ms": round(max(latencies)),
            "startup_s": round(window["first_output"] - launched, 1),
            "class_archive": archived,
            "peak_rss_mib": round(memory.rss / 2**20),
            "peak_pss_mib": round(memory.pss / 2**20),
            "memory_at_peak": memory.by_kind_mib(),
        }

    def run(self, results: dict) -> list[str]:
        """Every part of ``PARTS`` into ``results``; returns the parts that failed.

        Throughput runs are interleaved (round 1 of every part, then round 2, ...), so a slow spell of the
        machine or the broker lands on all parts alike instead of on whichever part ran then.
        """
        failed: list[str] = []
        throughput = [p for p in PARTS if p in THROUGHPUT]
        rates: dict[str, list[float]] = {p: [] for p in throughput}

        def attempt(part: str, action) -> None:  # noqa: ANN001
            began = time.monotonic()
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - report the other parts, then fail
                failed.append(part)
                results[part] = {"error": str(exc)}
                print(f"[bench] {part} FAILED: {exc}", file=sys.stderr, flush=True)
            print(f"[bench] {part} took {time.monotonic() - began:.0f} s", flush=True)

        for part in throughput:
            if (part in JOBS or part in SPARK_KAFKA_PARTS) and WARMUP_RUNS:
                attempt(part, lambda part=part: self.warm_up(part))
        for round_ in range(RUNS):
            for part in throughput:
                if part not in failed:
                    print(f"[bench] {part}, run {round_ + 1} of {RUNS}", flush=True)
                    attempt(part, lambda part=part: rates[part].append(getattr(self, part)()))
        for part in throughput:
            if part not in failed:
                results[part] = {
                    "records_per_s": round(statistics.median(rates[part])),
                    "runs": [round(r) for r in rates[part]],
                }
                cpu = self.cpu_seconds.get(part, [])[-RUNS:]  # the measured runs' CPU seconds (utime + stime)
                if cpu:
                    results[part]["cpu_seconds"] = round(statistics.median(cpu), 1)
                    results[part]["records_per_cpu_s"] = round(RECORDS / max(statistics.median(cpu), 1e-3))
                startups = self.startups.get(part, [])[-RUNS:]  # the measured runs' launch to first output
                if startups:
                    first = statistics.median(startups)
                    results[part]["first_output_s"] = round(first, 1)
                    # the rate once running: input records over the time from its first output to its last
                    last = statistics.median(RECORDS / rate for rate in rates[part])
                    results[part]["records_per_s_running"] = round(RECORDS / max(last - first, 1e-3))
        for part in PARTS:
            if part not in THROUGHPUT:
                print(f"[bench] {part}", flush=True)
                attempt(part, lambda part=part: results.__setitem__(part, getattr(self, part)()))
        return failed

    def booking(self):  # noqa: ANN201
        """The input message's descriptor."""
        from dagger.schema.descriptor_sets import SchemaRegistry, StencilSettings

        registry = SchemaRegistry(StencilSettings(urls=[self.descriptors]))
        return registry.get().find_message("dagger.examples.BookingLogMessage")


class FirstOutput:
    """The produce time of the first record written to ``topic``, watched by one consumer kept open (a consumer
    made for every look starts threads and connections ten times a second, on the cores the job is starting on).
    """

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"first-{uuid.uuid4()}"})
        partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self.at: float | None = None

    def look(self, timeout: float = 0.1) -> float | None:
        """The first output's produce time (s) once a record has arrived, else None."""
        if self.at is None:
            found = [m.timestamp()[1] / 1000 for m in self.consumer.consume(100, timeout) if m.error() is None]
            if found:
                self.at = min(found)
                self.close()
        return self.at

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


def _expected_outputs(bootstrap: str, source: str) -> int:
    """Input records the stateless filter keeps (amount_paid_by_cash < 500), counted with ptars."""
    return len(_read(bootstrap, source, "dagger.examples.BookingLogMessage", keep=True))


def _read_batch(bootstrap: str, topic: str, message: str) -> tuple:
    """Every record of ``topic`` decoded by ptars (an Arrow record batch), and each one's produce time (ms)."""
    from dagger.schema.descriptor_sets import DescriptorSet
    from dagger.serde.decode import ptars_handler
    from testing.produce import consume_all

    descriptors = DescriptorSet([("x", (ROOT / "descriptors" / "examples.desc").read_bytes())])
    handler = ptars_handler(descriptors.find_message(message))
    records = consume_all(bootstrap, topic, idle_seconds=3)
    return handler.list_to_record_batch([m.value() for m in records]), [m.timestamp()[1] for m in records]


def _read(bootstrap: str, topic: str, message: str, keep: bool = False) -> dict:
    """``{event time (us): produce time (ms)}`` of every record of ``topic`` (decoded by ptars)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batch, produced = _read_batch(bootstrap, topic, message)
    stamps = batch.column("event_timestamp").cast(pa.int64()).to_pylist()
    if keep:
        kept = pc.less(batch.column("amount_paid_by_cash"), 500).to_pylist()
        return {s: p for s, p, k in zip(stamps, produced, kept, strict=True) if k}
    return dict(zip(stamps, produced, strict=True))


def _json_frame(bootstrap: str, topic: str) -> tuple:
    """The fields the latency parts match on (``event_timestamp``, ``order_number``, ``amount_paid_by_cash``) of
    every JSON record of ``topic`` as a frame, and their produce times (ms). Parsed by Arrow's JSON reader 200,000
    records at a time, those three fields only: four minutes at 20,000 records/s as Python dicts took 23 GB."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.json as pj

    from testing.produce import consume_all

    fields = pa.schema(
        [("event_timestamp", pa.string()), ("order_number", pa.string()), ("amount_paid_by_cash", pa.int64())]
    )
    options = pj.ParseOptions(explicit_schema=fields, unexpected_field_behavior="ignore")
    records = consume_all(bootstrap, topic, idle_seconds=3)
    produced = [m.timestamp()[1] for m in records]
    tables = []
    step = 200_000
    for i in range(0, len(records), step):
        chunk = b"\n".join(m.value() for m in records[i : i + step])
        records[i : i + step] = [None] * len(records[i : i + step])  # let the messages go as they are read
        tables.append(pj.read_json(pa.BufferReader(chunk), parse_options=options))
    frame = pa.concat_tables(tables).to_pandas() if tables else pd.DataFrame()
    return frame, produced


def _json_stamps(bootstrap: str, topic: str) -> dict:
    """``{(event time (ms), order number, amount): produce time (ms)}`` of the JSON records of ``topic``: Spark's
    ``to_json`` writes timestamps in milliseconds, so inputs and outputs are matched on the millisecond and two
    fields (records of one millisecond that match in all three are one key: a few, out of 10 a millisecond)."""
    import pandas as pd

    frame, produced = _json_frame(bootstrap, topic)
    if frame.empty:
        return {}
    stamps = pd.to_datetime(frame["event_timestamp"], utc=True, format="ISO8601").astype("int64") // 1_000_000
    keys = zip(stamps, frame["order_number"], frame["amount_paid_by_cash"], strict=True)
    return {(int(s), o, int(a)): p for (s, o, a), p in zip(keys, produced, strict=True)}


def _expected_json_outputs(bootstrap: str, source: str) -> int:
    """The JSON records of ``source`` the stateless filter keeps."""
    frame, _ = _json_frame(bootstrap, source)
    return 0 if frame.empty else int((frame["amount_paid_by_cash"] < 500).sum())


def _matched(sent: dict, written: dict, begin: float, end: float) -> list[tuple[float, float]]:
    """``(input produce time (s), output produce time - input produce time (ms))`` for each record, matched by its
    event time, written from an input produced in [begin, end)."""
    return sorted(
        (sent[s] / 1000, written[s] - sent[s]) for s in written if s in sent and begin * 1000 <= sent[s] < end * 1000
    )


def _json_latencies(bootstrap: str, source: str, out: str, begin: float, end: float) -> list[tuple[float, float]]:
    """As :func:`_latencies`, for JSON records."""
    sent, written = _json_stamps(bootstrap, source), _json_stamps(bootstrap, out)
    return _matched(sent, written, begin, end)


def _latencies(bootstrap: str, source: str, out: str, begin: float, end: float) -> list[tuple[float, float]]:
    """``(input produce time (s), output produce time - input produce time (ms))`` per output record whose input
    was produced in [begin, end)."""
    sent = _read(bootstrap, source, "dagger.examples.BookingLogMessage")
    written = _read(bootstrap, out, "dagger.examples.BookingSummaryMessage")
    return _matched(sent, written, begin, end)


def _copied_latencies(bootstrap: str, source: str, out: str, begin: float, end: float) -> list[tuple[float, float]]:
    """As :func:`_latencies`, for records copied unchanged (``latency_spark_floor``)."""
    sent = _read(bootstrap, source, "dagger.examples.BookingLogMessage")
    written = _read(bootstrap, out, "dagger.examples.BookingLogMessage")
    return _matched(sent, written, begin, end)


def _window_latencies(bootstrap: str, source: str, out: str, begin: float, end: float) -> list[tuple[float, float]]:
    """``(closing input's produce time (s), output produce time - closing input's produce time (ms))`` per output
    row of a window closed by an input produced in [begin, end). A window ending at W closes when the watermark
    (the largest event time read minus the delay) reaches W: at the first input, in produce order, whose event
    time makes the largest so far ≥ W + delay; what the job takes after that is its latency."""
    import numpy as np
    import pyarrow as pa

    sent = _read(bootstrap, source, "dagger.examples.BookingLogMessage")  # {event time us: produce ms}
    order = sorted((produced, stamp) for stamp, produced in sent.items())
    produced_at = np.array([produced for produced, _ in order])
    largest = np.maximum.accumulate(np.array([stamp for _, stamp in order]))  # the watermark's source, in order
    rows, written = _read_batch(bootstrap, out, "dagger.examples.BookingCountMessage")
    ends = rows.column("window_timestamp").cast(pa.int64()).to_numpy()
    closing = np.searchsorted(largest, ends + WATERMARK_DELAY_MS * 1000)  # the first input to pass end + delay
    timed = []
    for i, produced in zip(closing.tolist(), written, strict=True):
        if i < len(produced_at) and begin * 1000 <= produced_at[i] < end * 1000:
            timed.append((produced_at[i] / 1000, produced - int(produced_at[i])))
    return sorted(timed)


def _plot_latency(timed: list[tuple[float, float]], begin: float, path: Path, name: str = "latency") -> None:
    """p50 and p99 of each second of the measured window, as a PNG."""
    if not timed:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds: dict[int, list[float]] = {}
    for sent, ms in timed:
        seconds.setdefault(int(sent - begin), []).append(ms)
    xs = sorted(seconds)
    fig, axis = plt.subplots(figsize=(10, 4))
    for q in (50, 99):
        axis.plot(xs, [_percentile(seconds[x], q) for x in xs], label=f"p{q}")
    axis.set_xlabel("seconds into the measured window")
    axis.set_ylabel("end-to-end latency (ms)")
    job = "window job (beyond the window's own wait)" if name == "latency_window" else "stateless job"
    axis.set_title(f"{job} at {LATENCY_RATE:,.0f} records/s: latency per second of input")
    axis.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _worst_window_p99(timed: list[tuple[float, float]], width: float) -> int | None:
    """The highest p99 of any ``width``-second window of input time (sliding by a second) over ``timed`` (input
    time in s, latency in ms): what a p99 that must hold in every window is held to. None when the measured span
    is shorter than one window."""
    if not timed or timed[-1][0] - timed[0][0] < width:
        return None
    import numpy as np

    times = np.array([t for t, _ in timed])
    values = np.array([ms for _, ms in timed])
    worst = 0.0
    start = times[0]
    while start + width <= times[-1] + 1:
        lo, hi = np.searchsorted(times, [start, start + width])
        if hi > lo:  # the same rank as _percentile's
            window = values[lo:hi]
            worst = max(
                worst,
                float(
                    np.partition(window, min(len(window) - 1, int(len(window) * 0.99)))[
                        min(len(window) - 1, int(len(window) * 0.99))
                    ]
                ),
            )
        start += 1.0
    return round(worst)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def main() -> None:
    from testing.broker import Broker
    from testing.descriptor_server import DescriptorServer

    results: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "cores": CORES,
        "records": RECORDS,
        "runs": RUNS,
    }
    with Broker() as broker, DescriptorServer(ROOT / "descriptors") as stencil:
        bench = Bench(broker, stencil.url("examples.desc"))
        bench.generate()
        failed = bench.run(results)
        if bench.spark is not None:
            bench.spark.stop()
        if bench.registry is not None:
            bench.registry.stop()
    report(results)
    if failed:
        sys.exit(f"bench parts failed: {', '.join(failed)}")


def report(results: dict) -> None:
    """Ratios, the markdown table and the JSON file."""

    def speed(name: str) -> int | None:
        return results.get(name, {}).get("records_per_s")

    for name in (p for p in THROUGHPUT if p not in ("baseline", "bytewax", "quix")):
        if speed(name) and speed("baseline"):
            results[name]["vs_baseline"] = round(speed(name) / speed("baseline"), 2)
    for peer in ("bytewax", "quix"):
        if speed("stateless") and speed(peer):
            results["stateless"][f"vs_{peer}"] = round(speed("stateless") / speed(peer), 2)
    rows = ["| measurement | value | target |", "|---|---|---|"]

    def rate(name: str, label: str, target: str = "") -> None:
        if "error" in results.get(name, {}):
            rows.append(f"| {label} | failed: {results[name]['error'][:100]} | {target} |")
        elif name in results:
            r = results[name]
            ratio = f" ({r['vs_baseline']:.2f}× baseline)" if "vs_baseline" in r else ""
            cpu = f"; {r['records_per_cpu_s']:,} per CPU-second" if "records_per_cpu_s" in r else ""
            rows.append(f"| {label} | {r['records_per_s']:,} records/s{ratio}{cpu} | {target} |")

    rate("baseline", "baseline: confluent-kafka copy loop, 2 processes")
    rate("stateless", "stateless job", "≥ 1.0× baseline")
    rate(
        "stateless_ptars", "stateless job, protobuf by ptars, Dagger's reader and writer (the defaults before issue 53)"
    )
    rate("stateless_dagger_jvm", "stateless job, protobuf in the JVM, Dagger's reader and writer")
    rate("stateless_spark_jvm", "stateless job, protobuf in the JVM, Spark's Kafka source and sink")
    rate("stateless_spark", "stateless, Spark's Kafka source and sink, ptars in mapInArrow")
    rate("stateless_spark_floor", "Spark's floor: each value copied by Spark's Kafka source and sink, no decoding")
    rate("stateless_avro", "stateless job over Confluent Avro input (the same records)", "≥ 0.8× stateless")
    rate("stateless_avro_spark", "the same, decoded by Spark's from_avro")
    if speed("stateless_avro") and speed("stateless"):
        results["stateless_avro"]["vs_stateless"] = round(speed("stateless_avro") / speed("stateless"), 2)
        rows.append(
            f"| Confluent Avro input against protobuf input | {results['stateless_avro']['vs_stateless']:.2f}× | ≥ 0.8× |"
        )
    rate("stateless_json", "stateless job over JSON input (the same records)")
    rate("stateless_json_out", "stateless job, JSON in and out")
    rate("stateless_json_spark", "stateless, JSON in and out, Spark's Kafka source and sink, from_json/to_json")
    rate("window", "1-minute window job", "≥ 1.2× baseline")
    rate("window_spark", "1-minute window, Spark's Kafka source and sink, ptars in mapInArrow, Spark's window()")
    rate("join", f"interval join of {JOIN_RECORDS:,} records with themselves (±1 minute), input records/s")
    rate("join_spark", "the interval join on Spark's Kafka source and sink, ptars in mapInArrow")
    rate("bytewax", "Bytewax, stateless, 2 processes")
    rate("quix", "Quix Streams, stateless, 2 processes")
    flink_version = _flink_version()
    rate("flink", f"Flink SQL {flink_version}, stateless, parallelism 2, one process (start-up included)")
    rate("flink_window", f"Flink SQL {flink_version}, 1-minute window job (start-up included)")
    a, b = results.get("window", {}), results.get("flink_window", {})
    if "records_per_s" in a and "records_per_s" in b:  # a window job writes at the end: no rate "once running"
        rows.append(
            f"| window job, {results['records']:,} records: launch to last output, ours (warm session) and Flink SQL"
            f" (its JVM's start included) | {results['records'] / a['records_per_s']:.1f} s and "
            f"{results['records'] / b['records_per_s']:.1f} s | |"
        )
    for ours, theirs, job in (("stateless", "flink", "stateless job"),):
        a, b = results.get(ours, {}), results.get(theirs, {})
        if "records_per_s_running" in a and "records_per_s_running" in b:
            ratio = a["records_per_s_running"] / b["records_per_s_running"]
            results[ours][f"vs_{theirs}_running"] = round(ratio, 2)
            rows.append(
                f"| {job} once running (first output to last), ours ÷ Flink SQL | {a['records_per_s_running']:,} ÷ "
                f"{b['records_per_s_running']:,} records/s = {ratio:.2f}×; first output after {a['first_output_s']} s"
                f" (warm session) and {b['first_output_s']} s (launch) | > 1× per core (same 2 cores) |"
            )
    s = results.get("stateless", {})
    if "vs_bytewax" in s:
        rows.append(f"| stateless job ÷ Bytewax | {s['vs_bytewax']:.2f}× | ≥ 3× |")
    if "vs_quix" in s:
        rows.append(f"| stateless job ÷ Quix Streams | {s['vs_quix']:.2f}× | ≥ 5× |")
    rt = results.get("latency_realtime", {})
    if "p99_ms" in rt:
        rows.append(
            f"| stateless, JSON, Spark's connector in real-time mode: latency p50 / p99 at {rt['rate']:,.0f} "
            f"records/s, records lost | {rt['p50_ms']:,} / {rt['p99_ms']:,} ms, {rt['lost']:,} lost of "
            f"{rt['inputs_kept']:,} (checkpoint every {rt['checkpoint_interval_ms'] / 1000:g} s, "
            f"{rt['measured_seconds']:g} s measured) | p50 ≤ 30, p99 ≤ 100 ms, 0 lost |"
        )
        if "peak_rss_mib" in rt:
            held = ", ".join(
                f"{kind} ×{k['processes']} {k['pss_mib']:,} ({k['rss_mib']:,})"
                for kind, k in (rt.get("memory_at_peak") or {}).items()
            )
            rows.append(
                f"| real-time job: peak memory PSS / RSS summed; who holds it, PSS (RSS) MiB | "
                f"{rt['peak_pss_mib']:,} / {rt['peak_rss_mib']:,} MiB; {held} | ≤ 1,536 MiB |"
            )
            rows.append(f"| real-time job: start-up, launch to first output | {rt['startup_s']} s | ≤ 6 s |")
    for part, job, target in (
        (
            "latency",
            "stateless job, protobuf (the defaults: Dagger's reader in the JVM)",
            "p99 ≤ 150 ms (4 partitions), ≤ 200 ms (32)",
        ),
        (
            "latency_ptars",
            "stateless job, protobuf by ptars, Dagger's reader and writer (the defaults before issue 53)",
            "",
        ),
        ("latency_dagger_jvm", "stateless job, protobuf in the JVM, Dagger's reader and writer", ""),
        ("latency_spark_jvm", "stateless job, protobuf in the JVM, Spark's Kafka source and sink", ""),
        ("latency_spark_floor", "Spark's floor: each value copied by Spark's Kafka source and sink, its defaults", ""),
        (
            "latency_spark_floor_async",
            "Spark's floor with the sink's asynchronous progress tracking (asyncProgressTrackingEnabled)",
            "",
        ),
        ("latency_realtime_proto", "stateless job, protobuf, real-time mode", "p50 ≤ 20, p99 ≤ 50 ms, 0 lost"),
        ("latency_spark", "stateless, Spark's Kafka source and sink, ptars in mapInArrow", ""),
        ("latency_window", "10-s window job, after the window closes", "p99 ≤ 250 ms"),
        ("latency_window_spark", "10-s window, Spark's Kafka source and sink, after the window closes", ""),
        ("latency_join", "interval join", ""),
        ("latency_join_spark", "interval join, Spark's Kafka source and sink", ""),
        ("latency_flink", f"Flink SQL {_flink_version()}, stateless job (its defaults)", ""),
    ):
        lat = results.get(part, {})
        if "p99_ms" not in lat:
            continue
        worst = f", worst 60-s window p99 {lat['worst_60s_p99_ms']:,} ms" if lat.get("worst_60s_p99_ms") else ""
        rows.append(
            f"| {job}: latency p50 / p99 at {lat['rate']:,.0f} records/s, {lat.get('partitions', 2)} partitions | "
            f"{lat['p50_ms']:,} / {lat['p99_ms']:,} ms (max {lat['max_ms']:,}{worst}) | {target} |"
        )
        phases = lat.get("batch_breakdown_ms") or {}
        if phases:
            parts = ", ".join(f"{k} {v:,.0f}" for k, v in phases.items() if k != "batch_seconds")
            rows.append(
                f"| {job}: a micro-batch ({lat['batches_per_s']} per s) | "
                f"{phases.get('batch_seconds', 0):,.0f} ms: {parts} ms | |"
            )
        rows.append(
            f"| {job}: peak memory of its processes, proportional (PSS) / resident (RSS summed) | "
            f"{lat['peak_pss_mib']:,} / {lat['peak_rss_mib']:,} MiB | "
            f"{ {'latency': '≤ 1,229 MiB (RSS)', 'latency_window': '≤ 2,048 MiB'}.get(part, '') } |"
        )
        held = lat.get("memory_at_peak") or {}
        if held:
            parts = ", ".join(
                f"{kind} ×{k['processes']} {k['pss_mib']:,} ({k['rss_mib']:,})" for kind, k in held.items()
            )
            rows.append(f"| {job}: who holds it at the PSS peak, PSS (RSS) MiB | {parts} | |")
        if part == "latency":
            warm = "class-data archive mapped" if lat.get("class_archive") else "no class-data archive yet"
            rows.append(f"| start-up, launch to first output ({warm}) | {lat['startup_s']} s | ≤ 6 s |")
        else:
            rows.append(f"| {job}: start-up, launch to first output | {lat['startup_s']} s | |")
        if "lost" in lat and part != "latency":
            extra = f"; {lat['extra']:,} more written than expected" if lat.get("extra") else ""
            rows.append(f"| {job}: records lost | {lat['lost']:,} of {lat['inputs_kept']:,}{extra} | 0 |")
    longbow = results.get("longbow", {})
    if "error" in longbow:
        rows.append(f"| Longbow | failed: {longbow['error'][:100]} | |")
    elif longbow:
        jobs, store = longbow["jobs_rows_per_s"], longbow["store"]
        base = jobs["without Longbow"]
        on = "; ".join(f"{label.removeprefix('Longbow on ')} {v:,} ({v / base:.2f}×)" for label, v in jobs.items())
        rows.append(
            f"| Longbow job, 30-day history per key ({longbow['job_rows']:,} rows, `longbow.md`): rows/s | {on} | |"
        )
        calls = "; ".join(f"{role} {c['mean_ms']} ms" for role, c in longbow.get("job_calls", {}).items())
        rows.append(
            f"| Longbow on Bigtable (emulator): reads per CPU-second; mean call time in the job | "
            f"{store['reads_per_cpu_s'] or 0:,}; {calls or 'no calls'} | ≥ 5,000 reads/s per core |"
        )
    text = (
        f"# Streaming benchmark ({results['machine']}, local[{CORES}], broker on the same machine)\n\n"
        + "\n".join(rows)
        + f"\n\n{results['records']:,} input records, median of {results['runs']} runs.\n"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "streaming.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "streaming.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
