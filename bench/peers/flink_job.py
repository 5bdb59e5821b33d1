"""The bench's stateless and window jobs on Apache Flink SQL: PyFlink's Table API in a local mini-cluster (one JVM,
``BENCH_FLINK_PARALLELISM`` slots), Kafka in and out, protobuf both ways (Flink's ``protobuf`` format over the
Java classes ``flink_setup.py`` compiles from ``descriptors/booking.proto``).

Run by ``.venv-flink/bin/python`` (``make .venv-flink/.installed``). Environment: ``BENCH_BOOTSTRAP``,
``BENCH_INPUT``, ``BENCH_OUTPUT``, ``BENCH_GROUP`` (the consumer group, a new one by default);
``BENCH_FLINK_JOB``: ``stateless`` or ``window``; ``BENCH_FLINK_BOUNDED``: 1 reads the input up to its latest
offsets at start and exits 0 when done (``scan.bounded.mode=latest-offset``; the end of input brings the final
watermark, so every window closes), 0 runs until killed; ``BENCH_FLINK_PARALLELISM`` (2); ``BENCH_FLINK_JARS``
(the jar folder, default the cache ``flink_setup.py`` fills); ``JVM_ARGS`` (the heap, default ``-Xms1g -Xmx4g``).

The SQL is the bench's own (``STATELESS_SQL``, ``WINDOW_SQL``): the input table is ``data_stream_0`` with
``rowtime`` from ``event_timestamp`` and a watermark ``WATERMARK_DELAY_MS`` behind it, as Dagger declares it.
Flink's protobuf format maps enums to STRING and ``google.protobuf.Timestamp`` to ``ROW<seconds, nanos>``, so the
window's ``TUMBLE_END`` (a ``TIMESTAMP_LTZ``) is turned into that row on its way to the sink. The sink is at-least-once
with no checkpoints (the producer flushes when the bounded input ends); records carry the produce time. Tuned as
Flink's documentation says for throughput: ``pipeline.object-reuse``, and the producer's batching
(``batch.size`` 1 MB as librdkafka's default, ``linger.ms`` 5). Flink's protobuf format decodes every field of the
input message (all 13); ours decode the 5 the SQL reads.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from flink_setup import jars_dir  # noqa: E402
from streaming import STATELESS_SQL, WATERMARK_DELAY_MS, WINDOW_SQL  # noqa: E402

BOOTSTRAP = os.environ.get("BENCH_BOOTSTRAP", "127.0.0.1:9092")
INPUT = os.environ.get("BENCH_INPUT", "bench-in")
OUTPUT = os.environ.get("BENCH_OUTPUT", "bench-out")
GROUP = os.environ.get("BENCH_GROUP") or f"flink-{uuid.uuid4()}"
JOB = os.environ.get("BENCH_FLINK_JOB", "stateless")
BOUNDED = os.environ.get("BENCH_FLINK_BOUNDED", "1") == "1"
PARALLELISM = int(os.environ.get("BENCH_FLINK_PARALLELISM", "2"))
JARS = Path(os.environ.get("BENCH_FLINK_JARS") or jars_dir())

LOCATION = "ROW<name STRING, latitude DOUBLE, longitude DOUBLE>"
TIMESTAMP = "ROW<seconds BIGINT, nanos INT>"
#: the whole BookingLogMessage, as Flink's protobuf format maps it
SOURCE_COLUMNS = f"""
  order_number STRING, service_type STRING, status STRING, customer_id STRING, event_timestamp {TIMESTAMP},
  driver_id STRING, driver_pickup_location {LOCATION}, driver_dropoff_location {LOCATION},
  amount_paid_by_cash BIGINT, total_distance_in_kms DOUBLE, item_tags ARRAY<STRING>, metadata MAP<STRING, STRING>,
  service_area_id STRING,
  rowtime AS TO_TIMESTAMP_LTZ(event_timestamp.seconds * 1000 + event_timestamp.nanos / 1000000, 3),
  WATERMARK FOR rowtime AS rowtime - INTERVAL '{WATERMARK_DELAY_MS / 1000:g}' SECOND"""
#: job -> (sink message, sink columns, the INSERT's query)
JOBS = {
    "stateless": (
        "dagger.examples.BookingSummaryMessage",
        f"order_number STRING, service_type STRING, pickup {LOCATION}, event_timestamp {TIMESTAMP}, "
        "amount_paid_by_cash BIGINT",
        STATELESS_SQL,
    ),
    "window": (
        "dagger.examples.BookingCountMessage",
        "service_area_id STRING, service_type STRING, booking_count BIGINT, total_distance_in_kms DOUBLE, "
        f"max_amount_paid_by_cash BIGINT, window_timestamp {TIMESTAMP}",
        "SELECT service_area_id, service_type, booking_count, total_distance_in_kms, max_amount_paid_by_cash, "
        "ROW(EXTRACT(EPOCH FROM window_timestamp), CAST(MOD(EXTRACT(MILLISECOND FROM window_timestamp), 1000) "
        f"* 1000000 AS INT)) FROM ({WINDOW_SQL})",
    ),
}


def kafka(topic: str, message: str, **options: str) -> str:
    """The WITH clause of a Kafka table of protobuf ``message`` records."""
    settings = {
        "connector": "kafka",
        "topic": topic,
        "properties.bootstrap.servers": BOOTSTRAP,
        "format": "protobuf",
        "protobuf.message-class-name": message,
        **options,
    }
    return ", ".join(f"'{k}' = '{v}'" for k, v in settings.items())


def main() -> None:
    os.environ.setdefault("JVM_ARGS", "-Xms1g -Xmx4g")  # read when the gateway JVM (and mini-cluster) starts
    from pyflink.java_gateway import get_gateway
    from pyflink.table import EnvironmentSettings, TableEnvironment

    message, columns, query = JOBS[JOB]
    jars = sorted(JARS.glob("*.jar"))
    if not any(j.name.startswith("booking-proto-") for j in jars):
        sys.exit(f"no Flink jars in {JARS}: run make .venv-flink/.installed (bench/peers/flink_setup.py)")
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(j.as_uri() for j in jars))
    config.set("parallelism.default", str(PARALLELISM))
    config.set("table.local-time-zone", "UTC")
    # the tuning Flink's documentation gives for throughput: object reuse between chained operators (records are
    # not copied on their way from the source to the sink), and the Kafka sink's producer batching below
    config.set("pipeline.object-reuse", "true")
    version = get_gateway().jvm.org.apache.flink.runtime.util.EnvironmentInformation.getVersion()
    print(f"[flink] Apache Flink {version}: {JOB}, {'bounded' if BOUNDED else 'unbounded'}", flush=True)

    bounded = {"scan.bounded.mode": "latest-offset"} if BOUNDED else {}
    source = kafka(
        INPUT,
        "dagger.examples.BookingLogMessage",
        **{"properties.group.id": GROUP, "scan.startup.mode": "earliest-offset"},
        **bounded,
    )
    env.execute_sql(f"CREATE TABLE data_stream_0 ({SOURCE_COLUMNS}\n) WITH ({source})")
    sink = kafka(
        OUTPUT,
        message,
        **{
            "sink.delivery-guarantee": "at-least-once",
            # the producer's batching, as ours (librdkafka batches up to 1 MB; the Java client's default is 16 KB)
            "properties.batch.size": "1000000",
            "properties.linger.ms": "5",
        },
    )
    env.execute_sql(f"CREATE TABLE sink ({columns}) WITH ({sink})")
    env.execute_sql(f"INSERT INTO sink {query}").wait()


if __name__ == "__main__":
    main()
