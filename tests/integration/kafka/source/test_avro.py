"""Avro streams end to end (``INPUT_DATATYPE=AVRO``): Confluent's wire format with the test registry, records
produced by confluent-kafka's own ``AvroSerializer`` (nothing of ours writes them), and plain Avro; decoded by
Spark's Avro reader, with exact counts against what the sink wrote."""

from __future__ import annotations

import datetime as dt
import io
import json

import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from testing.produce import consume_all, produce
from tests.conftest import START, dagger, dropped, job, json_sink, kafka_stream, output_rows, run_job

pytestmark = pytest.mark.integration

#: version 1 of the orders' schema: service_area_id an int, and a note that version 2 removes
V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_number", "type": "string"},
        {"name": "service_area_id", "type": "int"},
        {"name": "note", "type": "string"},
        {"name": "event_timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
#: version 2: service_area_id promoted to long, note removed, an optional discount added
V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_number", "type": "string"},
        {"name": "service_area_id", "type": "long"},
        {"name": "event_timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "discount", "type": ["null", "double"], "default": None},
    ],
}


def _order(i: int, version: int) -> dict:
    record = {
        "order_number": f"order-{i}",
        "service_area_id": i % 3,
        "event_timestamp": START + dt.timedelta(seconds=i),
    }
    if version == 1:
        record["note"] = f"v1-{i}"
    else:
        record["discount"] = i / 4 if i % 2 else None
    return record


def _serializers(registry, schemas: list[dict]) -> list[AvroSerializer]:
    client = SchemaRegistryClient({"url": registry.url})
    return [AvroSerializer(client, json.dumps(s), conf={"auto.register.schemas": True}) for s in schemas]


def _avro_stream(broker, registry_topic: str, **extra) -> dict:
    stream = kafka_stream(broker, registry_topic)
    del stream["INPUT_SCHEMA_PROTO_CLASS"], stream["INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX"]
    stream.update(
        INPUT_DATATYPE="AVRO",
        INPUT_SCHEMA_WIRE_FORMAT="confluent",
        INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_NAME="event_timestamp",
    )
    stream.update(extra)
    return stream


SQL = "SELECT order_number, service_area_id, discount, rowtime FROM data_stream_0"


def test_two_writer_versions_interleaved_are_read_into_the_latest_versions_columns(
    spark, broker, schema_registry, topic, tmp_path
):
    source, out = topic("avro-orders"), topic("avro-out")
    v1, v2 = _serializers(schema_registry, [V1, V2])
    context = SerializationContext(source, MessageField.VALUE)
    records = [(None, (v1 if i % 2 == 0 else v2)(_order(i, 1 if i % 2 == 0 else 2), context)) for i in range(40)]
    produce(broker.bootstrap, source, records)
    assert {r[1][1:5] for r in records} == {(1).to_bytes(4, "big"), (2).to_bytes(4, "big")}  # two writer ids
    data = job(
        None,
        [_avro_stream(broker, source)],
        SQL,
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        **json_sink(broker, out),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = sorted((json.loads(m.value()) for m in output_rows(broker, manager, out, 40)), key=lambda r: r["rowtime"])
    assert [r["order_number"] for r in rows] == [f"order-{i}" for i in range(40)]
    assert [r["service_area_id"] for r in rows] == [i % 3 for i in range(40)]  # v1's ints read as v2's longs
    assert [r["discount"] for r in rows] == [None if i % 2 == 0 else i / 4 for i in range(40)]
    assert "note" not in rows[0]
    assert rows[5]["rowtime"].startswith("2026-11-22T10:00:05")


def test_plain_avro_reads_bare_datums_with_the_schema_from_a_file_and_writes_them_with_a_given_one(
    spark, broker, topic, tmp_path
):
    source, out = topic("avro-plain"), topic("avro-plain-out")
    parsed = fastavro.parse_schema(V2)

    def datum(i: int) -> bytes:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, _order(i, 2))
        return buffer.getvalue()

    produce(broker.bootstrap, source, ((None, datum(i)) for i in range(25)))
    schema_file = tmp_path / "order.avsc"
    schema_file.write_text(json.dumps(V2))
    stream = _avro_stream(broker, source, INPUT_SCHEMA_WIRE_FORMAT="plain", INPUT_SCHEMA_AVRO_SCHEMA=str(schema_file))
    written = {
        "type": "record",
        "name": "Out",
        "fields": [
            {"name": "order_number", "type": "string"},
            {"name": "service_area_id", "type": "long"},
            {"name": "discount", "type": ["null", "double"]},
            {"name": "rowtime", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        ],
    }
    sink = _avro_sink(broker, out, SINK_KAFKA_WIRE_FORMAT="plain", SINK_KAFKA_AVRO_SCHEMA=json.dumps(written))
    sql = "SELECT order_number, service_area_id, discount, rowtime FROM data_stream_0"
    data = job(None, [stream], sql, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    read = fastavro.parse_schema(written)
    rows = [
        fastavro.schemaless_reader(io.BytesIO(m.value()), read, None) for m in output_rows(broker, manager, out, 25)
    ]
    assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(25))
    assert sum(r["discount"] is not None for r in rows) == 12


def _corrupted(schema_registry, source: str) -> tuple[list[tuple[None, bytes]], list[str]]:
    """Ten good records and four bad ones: wrong magic byte, an id the registry lacks, a truncated payload, a
    record shorter than the header; with the reasons the bad ones must get."""
    (v2,) = _serializers(schema_registry, [V2])
    context = SerializationContext(source, MessageField.VALUE)
    good = [v2(_order(i, 2), context) for i in range(10)]
    bad = [b"\x07" + good[0][1:], b"\x00\x00\x00\x03\xe7" + good[1][5:], good[2][:8], b"\x00\x00\x01"]
    records = [(None, v) for v in good[:5] + bad + good[5:]]
    return records, ["magic byte 7", "unknown schema id 999", "not an Avro datum of schema id 1", "3 bytes"]


def test_corrupted_framing_is_dropped_and_counted(spark, broker, schema_registry, topic, tmp_path):
    source, out = topic("avro-bad"), topic("avro-bad-out")
    records, _ = _corrupted(schema_registry, source)
    produce(broker.bootstrap, source, records)
    stream = _avro_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")
    data = job(None, [stream], SQL, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **json_sink(broker, out))
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(m.value()) for m in output_rows(broker, manager, out, 10)]
    assert sorted(str(r["order_number"]) for r in rows) == sorted(f"order-{i}" for i in range(10)), rows
    assert dropped(query) == 4


def test_corrupted_framing_goes_to_dead_letters_with_reasons_and_the_raw_bytes(
    spark, broker, schema_registry, topic, tmp_path
):
    source, out = topic("avro-dl"), topic("avro-dl-out")
    records, reasons = _corrupted(schema_registry, source)
    produce(broker.bootstrap, source, records)
    stream = _avro_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="dead-letter")
    data = job(
        None,
        [stream],
        SQL,
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        DEAD_LETTER_PATH=str(tmp_path / "dl"),
        **json_sink(broker, out),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert len(output_rows(broker, manager, out, 10)) == 10
    letters = [
        json.loads(line)
        for f in sorted((tmp_path / "dl").glob("*.jsonl"))
        for line in f.read_text().split("\n")
        if line
    ]
    by_offset = {d["coordinates"]["offset"]: d for d in letters}
    assert sorted(by_offset) == [5, 6, 7, 8]
    for offset, reason in zip([5, 6, 7, 8], reasons, strict=True):
        assert reason in by_offset[offset]["reason"], by_offset[offset]["reason"]
        raw = records[offset][1]
        assert by_offset[offset]["value_base64"] == __import__("base64").b64encode(raw).decode()


def test_a_restart_with_the_registry_down_reads_with_the_schemas_the_checkpoint_pinned(
    spark, broker, schema_registry, topic, tmp_path, caplog
):
    source, out = topic("avro-down"), topic("avro-down-out")
    v1, v2 = _serializers(schema_registry, [V1, V2])
    schema_registry.register(f"{source}-value", json.dumps(V1))
    schema_registry.register(f"{source}-value", json.dumps(V2))  # both versions known when the job first starts
    context = SerializationContext(source, MessageField.VALUE)
    produce(broker.bootstrap, source, ((None, v1(_order(i, 1), context)) for i in range(10)))
    stream = _avro_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")
    data = job(
        None,
        [stream],
        SQL,
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        SCHEMA_REGISTRY_CONFLUENT_RETRIES="1",
        **json_sink(broker, out),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    unknown = b"\x00\x00\x00\x03\xe7" + v2(_order(99, 2), context)[5:]  # an id the pinned copy does not have
    produce(broker.bootstrap, source, [(None, v2(_order(i, 2), context)) for i in range(10, 30)] + [(None, unknown)])
    schema_registry.down()
    with caplog.at_level("WARNING", logger="dagger"):
        manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    said = [r.getMessage() for r in caplog.records if "going on with the copy" in r.getMessage()]
    assert len(said) == 1 and "the schema registry at" in said[0], said
    assert manager.counters.sinks["kafka"]["written"].value == 20  # this run's: the first run wrote 10
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=30)]
    assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(30))
    assert dropped(query) == 1


def test_wrong_registry_credentials_end_validate_with_one_clear_line(tmp_path):
    from types import SimpleNamespace

    from testing.schema_registry import SchemaRegistry

    broker = SimpleNamespace(bootstrap="127.0.0.1:9")  # validate reads no record

    with SchemaRegistry(user_info="reader:secret") as registry:
        registry.register("orders-value", json.dumps(V2))
        stream = _avro_stream(broker, "orders")
        data = job(
            None,
            [stream],
            SQL,
            SCHEMA_REGISTRY_CONFLUENT_URL=registry.url,
            SCHEMA_REGISTRY_CONFLUENT_BASIC_AUTH_USER_INFO="reader:wrong",
            SCHEMA_REGISTRY_CONFLUENT_RETRIES="0",
            SINK_TYPE="log",
        )
        config = tmp_path / "job.json"
        config.write_text(json.dumps(data))
        result = dagger("validate", str(config))
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "credentials were refused by the schema registry at" in last, result.stderr
    assert "SCHEMA_REGISTRY_CONFLUENT_BASIC_AUTH_USER_INFO" in last
    assert "wrong" not in result.stderr and "Traceback" not in result.stderr


#: every Avro type the docs' mapping table names
WIDE = {
    "type": "record",
    "name": "Wide",
    "namespace": "t",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "by", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Fx", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "a", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "r", "type": {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "again", "type": ["null", "R"]},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "late", "type": ["string", "null"]},
        {"name": "num", "type": ["int", "long"]},
        {"name": "real", "type": ["null", "float", "double"]},
        {"name": "u", "type": ["null", "string", "R"]},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}},
        {
            "name": "fdec",
            "type": {"type": "fixed", "name": "Fd", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}


def test_the_type_mapping_is_the_one_sparks_avro_reader_gives(spark):
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from dagger.formats.avro.types import avro_struct

    ours = avro_struct(json.dumps(WIDE), "here")
    spark_type = spark.range(1).select(from_avro(F.lit(None).cast("binary"), json.dumps(WIDE)).alias("r")).schema
    assert ours.simpleString() == spark_type["r"].dataType.simpleString()
    assert [f.nullable for f in ours.fields] == [f.nullable for f in spark_type["r"].dataType.fields]


def _deserialized(registry, broker, manager, out: str, expected: int) -> list[dict]:
    """The sink's records read back by confluent-kafka's own AvroDeserializer (nothing of ours decodes them)."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    read = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    context = SerializationContext(out, MessageField.VALUE)
    return [read(m.value(), context) for m in output_rows(broker, manager, out, expected)]


def _avro_sink(broker, out: str, **extra) -> dict:
    return {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "SINK_KAFKA_TOPIC": out,
        "SINK_KAFKA_DATA_TYPE": "AVRO",
        "SINK_KAFKA_WIRE_FORMAT": "confluent",
        **extra,
    }


def test_the_avro_sink_registers_the_outputs_schema_and_confluents_deserializer_reads_it(
    spark, broker, schema_registry, topic, tmp_path
):
    source, out = topic("avro-in"), topic("avro-reg-out")
    (v2,) = _serializers(schema_registry, [V2])
    context = SerializationContext(source, MessageField.VALUE)
    produce(broker.bootstrap, source, ((None, v2(_order(i, 2), context)) for i in range(20)))
    sink = _avro_sink(broker, out, SINK_KAFKA_SCHEMA_AUTO_REGISTER="true", SINK_KAFKA_AVRO_RECORD_NAME="shop.Out")
    data = job(None, [_avro_stream(broker, source)], SQL, SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url, **sink)
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = _deserialized(schema_registry, broker, manager, out, 20)
    assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(20))
    by_number = {r["order_number"]: r for r in rows}
    assert by_number["order-3"]["discount"] == 0.75 and by_number["order-4"]["discount"] is None
    assert by_number["order-5"]["rowtime"] == START + dt.timedelta(seconds=5)
    registered = SchemaRegistryClient({"url": schema_registry.url}).get_latest_version(f"{out}-value")
    assert json.loads(registered.schema.schema_str)["name"] == "Out"


def test_the_avro_sink_writes_with_the_subjects_schema_and_refuses_output_that_does_not_fit(
    spark, broker, schema_registry, topic, tmp_path
):
    source, out = topic("avro-in2"), topic("avro-lookup-out")
    (v2,) = _serializers(schema_registry, [V2])
    context = SerializationContext(source, MessageField.VALUE)
    produce(broker.bootstrap, source, ((None, v2(_order(i, 2), context)) for i in range(12)))
    target = {
        "type": "record",
        "name": "Summary",
        "fields": [
            {"name": "order_number", "type": "string"},
            {"name": "service_area_id", "type": "long"},
            {"name": "discount", "type": ["null", "double"], "default": None},
        ],
    }
    schema_id = schema_registry.register("shop-summary", json.dumps(target))
    # order-3 loses its number: the schema's field is not nullable, so that row alone goes to the dead letters
    sql = (
        "SELECT CASE WHEN order_number = 'order-3' THEN NULL ELSE order_number END AS order_number, service_area_id, "
        "discount FROM data_stream_0"
    )
    data = job(
        None,
        [_avro_stream(broker, source)],
        sql,
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        DEAD_LETTER_PATH=str(tmp_path / "dl"),
        **_avro_sink(broker, out, SINK_KAFKA_SCHEMA_SUBJECT="shop-summary"),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = _deserialized(schema_registry, broker, manager, out, 11)
    assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(12) if i != 3)
    letters = [json.loads(x) for f in (tmp_path / "dl").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert len(letters) == 1 and letters[0]["row"]["service_area_id"] == 0
    assert letters[0]["reason"] == "null in order_number, whose field in the Avro schema is not a union with null"
    raw = consume_all(broker.bootstrap, out, expected=11)
    assert {m.value()[:5] for m in raw} == {b"\0" + schema_id.to_bytes(4, "big")}
    # an int column where the schema says long, and a column the schema lacks: refused before start
    from dagger.job import Job, load_config

    bad = {
        **data,
        "FLINK_SQL_QUERY": "SELECT order_number, CAST(service_area_id AS INT) AS service_area_id, discount, 1 AS extra FROM data_stream_0",
    }
    text = "\n".join(Job(load_config(data=bad), checkpoint_dir=str(tmp_path / "cp2"), spark=spark).validate().problems)
    assert "column 'service_area_id' is int, the schema's field is bigint" in text
    assert "output column(s) extra are not in the schema" in text


def test_the_example_config_reads_avro_windows_it_and_writes_avro_back(spark, broker, schema_registry, topic, tmp_path):
    source, out = topic("shop-orders"), topic("shop-per-minute")
    (v2,) = _serializers(schema_registry, [V2])
    context = SerializationContext(source, MessageField.VALUE)
    # three minutes of orders, one a second: the windows ending 10:01 and 10:02 close (the watermark trails by 10 s)
    produce(broker.bootstrap, source, ((None, v2(_order(i, 2), context)) for i in range(180)))
    env = {
        "ORDERS_TOPIC": source,
        "COUNTS_TOPIC": out,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "SCHEMA_REGISTRY_URL": schema_registry.url,
    }
    result = dagger(
        "run", "configs/avro_registry.json", "--available-now", "--checkpoint-dir", str(tmp_path / "cp"), env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    read = AvroDeserializer(SchemaRegistryClient({"url": schema_registry.url}))
    rows = [
        read(m.value(), SerializationContext(out, MessageField.VALUE))
        for m in consume_all(broker.bootstrap, out, expected=6)
    ]
    got = sorted((r["service_area_id"], r["window_timestamp"].minute, r["order_count"]) for r in rows)
    assert got == sorted((area, minute, 20) for area in range(3) for minute in (1, 2))


@pytest.mark.parametrize("where", ["", " WHERE service_area_id >= 0"], ids=["all", "filtered on a decoded field"])
def test_an_undecodable_avro_payload_under_fail_ends_the_job_naming_topic_partition_and_offset(
    spark, broker, schema_registry, topic, tmp_path, where
):
    from dagger.runner import root_message

    source, out = topic("avro-fail"), topic("avro-fail-out")
    (v2,) = _serializers(schema_registry, [V2])
    context = SerializationContext(source, MessageField.VALUE)
    good = [v2(_order(i, 2), context) for i in range(4)]
    produce(broker.bootstrap, source, [(None, good[0]), (None, good[1]), (None, good[2][:7]), (None, good[3])])
    data = job(
        None,
        [_avro_stream(broker, source)],
        SQL + where,
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        **json_sink(broker, out),
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is not None
    message = root_message(query.exception())
    assert message == (
        f"InvalidRecordError: stream 'data_stream_0': record at topic {source} partition 0 offset 2 cannot be decoded: "
        "not an Avro datum of schema id 1. Set SOURCE_KAFKA_INVALID_RECORD_POLICY to 'drop' or 'dead-letter' to keep "
        "the job running past undecodable records."
    ), message
