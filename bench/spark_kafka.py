"""The benchmark's stateless workload written on Spark's own Kafka connector (spark-sql-kafka-0-10), as a Spark
user would write it: Spark's Kafka source, the records decoded, the SQL, the records encoded, Spark's Kafka sink.

* protobuf: decoded and encoded by ptars in ``mapInArrow`` (the same decoder and encoder our jobs use), since
  Maven Central serves no spark-protobuf (``from_protobuf``/``to_protobuf``);
* JSON: ``from_json`` and ``to_json``, so nothing leaves the JVM.

Used by ``bench/streaming.py``: in its own session for the throughput parts (``stateless_spark``, ...), and run as
a process of its own for the latency parts (``latency_spark``, ``latency_window_spark``, ``latency_join_spark``)::

    python bench/spark_kafka.py JOB.json SQL [--tables 2] [--watermark]

which reads the bootstrap servers, topics, descriptors and Spark settings from the Dagger job config ``JOB.json``
(the one ``dagger run`` gets in the part it is compared with), starts the session ``dagger run`` would (the same
JVM, class-data archive, fork server and jars) with the job settings it makes (``dagger.session.tuning``: the
local checkpoint's writer, Arrow's batch cap), and runs the job on Spark's Kafka source and sink, unbounded, in
micro-batches started as soon as the last one ends (Spark's default trigger), until it is terminated; then it
writes the last micro-batches' ``durationMs`` (Spark keeps 100) to ``progress.json`` beside ``JOB.json``.
"""

from __future__ import annotations

import json
from typing import Any

INPUT_MESSAGE = "dagger.examples.BookingLogMessage"
OUTPUT_MESSAGE = "dagger.examples.BookingSummaryMessage"
ROWTIME_FIELD = 5  # event_timestamp


def kafka_source(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def json_spark_schema(json_schema: dict) -> Any:
    """The Spark schema of the JSON records (the table's columns without the validity flag and rowtime)."""
    from pyspark.sql.types import StructType

    from dagger.formats.json.decode import JsonDecoder

    decoder = JsonDecoder(json.dumps(json_schema), "event_timestamp", "rowtime", None)
    return StructType([f for f in decoder.spark_schema.fields if f.name in json_schema.get("properties", {})])


def decoded_table(spark: Any, records: Any, descriptors: bytes | None, json_schema: dict | None) -> Any:
    """``records`` (Spark's Kafka source) as the table ``data_stream_0``."""
    from pyspark.sql import functions as F

    if json_schema is not None:
        schema = json_spark_schema(json_schema)
        return records.select(F.from_json(F.col("value").cast("string"), schema).alias("r")).select("r.*")
    spark_schema = _proto_decoder(descriptors).spark_schema

    def decode(batches):  # noqa: ANN001, ANN202 - runs on executors
        decoder = _proto_decoder(descriptors)
        for batch in batches:
            yield decoder.decode(batch.column("value")).batch

    return records.select("value").mapInArrow(decode, spark_schema)


def encoded(result: Any, descriptors: bytes | None, message: str = OUTPUT_MESSAGE) -> Any:
    """``result`` as Spark's Kafka sink takes it: one ``value`` column (``message`` records, or JSON)."""
    from pyspark.sql import functions as F

    if descriptors is None:
        return result.select(F.to_json(F.struct(*result.columns)).alias("value"))

    def encode(batches):  # noqa: ANN001, ANN202 - runs on executors
        import pyarrow as pa

        encoder = _proto_encoder(descriptors, message)
        for batch in batches:
            yield pa.RecordBatch.from_arrays([encoder.encode(batch)], names=["value"])

    return result.mapInArrow(encode, "value binary")


def stateless_query(
    spark: Any,
    bootstrap: str,
    source: str,
    out: str,
    sql: str,
    checkpoint: str,
    descriptors: bytes | None = None,
    json_schema: dict | None = None,
    source_options: dict[str, str] | None = None,
    message: str = OUTPUT_MESSAGE,
    tables: tuple[str, ...] = ("data_stream_0",),
    watermark: str | None = None,
    available_now: bool = True,
) -> Any:
    """Start the query: an ``availableNow`` run of ``sql`` over ``source`` into ``out`` (``message`` records); with
    ``available_now`` false, unbounded, in micro-batches started as soon as the last one ends.
    Each of ``tables`` is a read of ``source`` of its own (a self-join reads it twice); ``watermark`` (such as
    ``"10 seconds"``) puts a watermark on each table's ``rowtime`` (windows and interval joins need one)."""
    views = {}
    for table in tables:
        records = kafka_source(spark, bootstrap, source, **(source_options or {}))
        decoded = decoded_table(spark, records, descriptors, json_schema)
        if watermark is not None:
            decoded = decoded.withWatermark("rowtime", watermark)
        views[table] = f"{table}_{abs(hash((source, out))) % 10**8}"
        decoded.createOrReplaceTempView(views[table])
    for table, view in views.items():
        sql = sql.replace(table, view)
    result = spark.sql(sql)
    writer = (
        encoded(result, descriptors, message)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", checkpoint)
    )
    return (writer.trigger(availableNow=True) if available_now else writer).start()


def copy_query(
    spark: Any, bootstrap: str, source: str, out: str, checkpoint: str, available_now: bool, asynchronous: bool = False
) -> Any:
    """Spark's floor: each record's value copied from Spark's Kafka source to its sink (no decoding, no SQL);
    ``asynchronous``: the sink's asynchronous progress tracking."""
    writer = (
        kafka_source(spark, bootstrap, source)
        .select("value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", checkpoint)
    )
    if asynchronous:
        writer = writer.option("asyncProgressTrackingEnabled", "true")
    return (writer.trigger(availableNow=True) if available_now else writer).start()


_CACHE: dict[str, Any] = {}


def _proto_decoder(descriptors: bytes) -> Any:
    if "decoder" not in _CACHE:
        from dagger.schema.descriptor_sets import build_pool
        from dagger.serde.decode import ProtoDecoder

        descriptor = _pool(descriptors, build_pool).FindMessageTypeByName(INPUT_MESSAGE)
        _CACHE["decoder"] = ProtoDecoder(descriptor, ROWTIME_FIELD)
    return _CACHE["decoder"]


def _proto_encoder(descriptors: bytes, message: str) -> Any:
    if message not in _CACHE:
        from dagger.schema.descriptor_sets import build_pool
        from dagger.serde.encode import ProtoEncoder

        _CACHE[message] = ProtoEncoder(_pool(descriptors, build_pool).FindMessageTypeByName(message))
    return _CACHE[message]


def _pool(descriptors: bytes, build_pool: Any) -> Any:
    if "pool" not in _CACHE:
        from google.protobuf import descriptor_pb2

        _CACHE["pool"] = build_pool(descriptor_pb2.FileDescriptorSet.FromString(descriptors))
    return _CACHE["pool"]


def main(argv: list[str]) -> None:
    """``JOB.json SQL [--tables N] [--watermark]``: run ``SQL`` (Spark's SQL over ``data_stream_0`` ...) with the
    bootstrap servers, topics, descriptors, output message and Spark settings of the Dagger job config
    ``JOB.json`` on Spark's Kafka source and sink until terminated. Runs on the driver."""
    import argparse
    import urllib.request
    from pathlib import Path

    from bench.spark_kafka import stateless_query as query_of  # by reference: the UDFs pickle by module name
    from dagger.job import load_config
    from dagger.session.spark import get_session
    from dagger.session.tuning import tune

    parser = argparse.ArgumentParser(prog="bench/spark_kafka.py")
    parser.add_argument("job")
    parser.add_argument("sql")
    parser.add_argument("--tables", type=int, default=1, help="streams over the input: data_stream_0, _1, ...")
    parser.add_argument("--watermark", action="store_true", help="FLINK_WATERMARK_DELAY_MS on each rowtime")
    parser.add_argument(
        "--bare",
        action="store_true",
        help="Spark's floor: each record's value copied from the source to the sink, in a session of Spark's own "
        "defaults (the SQL is not run)",
    )
    parser.add_argument("--async-progress", action="store_true", help="the sink's asyncProgressTrackingEnabled")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.job).read_text())
    stream = data["STREAMS"][0]
    if args.bare:
        spark = bare_session(data.get("SPARK_MASTER") or "local[2]")
        query = copy_query(
            spark,
            stream["SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS"],
            stream["SOURCE_KAFKA_TOPIC_NAMES"],
            data["SINK_KAFKA_TOPIC"],
            str(Path(args.job).parent / "cp"),
            available_now=False,
            asynchronous=args.async_progress,
        )
        _run_until_terminated(query, Path(args.job).parent)
        return
    config = load_config(path=args.job)
    with urllib.request.urlopen(data["SCHEMA_REGISTRY_STENCIL_URLS"]) as answer:  # noqa: S310 - the bench's server
        descriptors = answer.read()
    spark = get_session(config)
    tune(spark, config, checkpoint_local=True, processor_settings={})  # the job settings `dagger run` makes
    query = query_of(
        spark,
        stream["SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS"],
        stream["SOURCE_KAFKA_TOPIC_NAMES"],
        data["SINK_KAFKA_TOPIC"],
        args.sql,
        str(Path(args.job).parent / "cp"),
        descriptors=descriptors,
        message=data["SINK_KAFKA_PROTO_MESSAGE"],
        tables=tuple(f"data_stream_{i}" for i in range(args.tables)),
        watermark=f"{config.FLINK_WATERMARK_DELAY_MS} milliseconds" if args.watermark else None,
        available_now=False,
    )
    _run_until_terminated(query, Path(args.job).parent)


def bare_session(master: str) -> Any:
    """A session of Spark's own defaults with the Kafka connector's jars: nothing of Dagger's but the jars' list."""
    from pyspark.sql import SparkSession

    from dagger.session.jars import session_settings

    builder = SparkSession.builder.master(master).appName("spark-floor")
    for key, value in session_settings().items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _run_until_terminated(query: Any, folder: Any) -> None:
    """Until SIGTERM; then the last micro-batches' ``durationMs`` (Spark keeps 100) into ``progress.json``."""
    import signal
    import threading

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    while not stopping.is_set() and query.isActive:
        query.awaitTermination(0.5)
    recent = [{"timestamp": p.timestamp, "durationMs": dict(p.durationMs)} for p in query.recentProgress]
    (folder / "progress.json").write_text(json.dumps(recent))
    query.stop()


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: bench and dagger
    main(sys.argv[1:])
