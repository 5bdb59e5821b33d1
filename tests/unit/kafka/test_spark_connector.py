"""Real-time mode's planning that needs no Spark: the options of Spark's Kafka source from a stream's keys (a job
in real-time mode runs in tests/integration/kafka/test_realtime.py)."""

from __future__ import annotations

import json

from dagger.job import load_config
from dagger.kafka.source.spark import kafka_options
from tests.unit.config.test_config import BASE, STREAM


def test_additional_consumer_configurations_reach_sparks_kafka_source_as_kafka_options():
    extra = {"fetch.min.bytes": "4096", "client.rack": "zone-b"}
    stream = {**STREAM, "SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS": json.dumps(extra)}
    config = load_config(data={**BASE, "STREAMS": [stream]})
    options = kafka_options(config.STREAMS[0], config, resolve=False)  # resolve=False: no consumer group asked
    assert (options["kafka.fetch.min.bytes"], options["kafka.client.rack"]) == ("4096", "zone-b")


def test_avro_and_confluent_framed_json_streams_are_refused_naming_why_and_protobuf_is_taken():
    from dagger.kafka.spark_connector import stream_refusals

    plain_json = {k: v for k, v in STREAM.items() if not k.startswith("INPUT_SCHEMA_") or k == "INPUT_SCHEMA_TABLE"}
    plain_json.update(INPUT_DATATYPE="JSON", INPUT_SCHEMA_JSON_SCHEMA='{"type": "object", "properties": {}}')
    framed = {**plain_json, "INPUT_SCHEMA_WIRE_FORMAT": "confluent", "INPUT_SCHEMA_TABLE": "framed"}
    avro = {**plain_json, "INPUT_DATATYPE": "AVRO", "INPUT_SCHEMA_TABLE": "avro"}
    del avro["INPUT_SCHEMA_JSON_SCHEMA"]
    proto = {**STREAM, "INPUT_SCHEMA_TABLE": "proto"}
    framed_proto = {**STREAM, "INPUT_SCHEMA_TABLE": "framed_proto", "INPUT_SCHEMA_WIRE_FORMAT": "confluent"}
    config = load_config(
        data={
            **BASE,
            "SCHEMA_REGISTRY_CONFLUENT_URL": "http://127.0.0.1:1",
            "STREAMS": [plain_json, framed, avro, proto, framed_proto],
        }
    )
    assert stream_refusals(config.STREAMS[0]) == []
    assert stream_refusals(config.STREAMS[3]) == [] and stream_refusals(config.STREAMS[4]) == []
    (framed_why,) = stream_refusals(config.STREAMS[1])
    assert framed_why.startswith("STREAMS[framed]: JSON records in Confluent's wire format are read by our Kafka")
    assert "real-time mode reads plain JSON, and protobuf plain or in Confluent's format" in framed_why
    (avro_why,) = stream_refusals(config.STREAMS[2])
    assert avro_why.startswith("STREAMS[avro]: INPUT_DATATYPE=AVRO records are read by our Kafka reader")
    (ptars_why,) = stream_refusals(config.STREAMS[3], jvm_protobuf=False)
    assert "protobuf is decoded by ptars in Python workers here" in ptars_why
    assert ptars_why.endswith("set SPARK_PROTOBUF_CODEC=jvm")


def test_sparks_connector_takes_stateless_protobuf_jobs_with_one_kafka_sink_and_names_what_keeps_others_out():
    from dagger.kafka.spark_connector import connector_refusals

    kafka = {"SINK_TYPE": "kafka", "SINK_KAFKA_BROKERS": "127.0.0.1:9092", "SINK_KAFKA_TOPIC": "out",
             "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage"}  # fmt: skip

    def why(bounded: bool = False, event_time: bool = False, jvm: bool = True, auto: bool = True, **changes) -> list:
        config = load_config(data={**BASE, **kafka, **changes})
        sinks = [type("S", (), {"dead_letter": changes.get("DEAD_LETTER_PATH")})()]
        return connector_refusals(config, bounded, event_time, sinks, jvm, protobuf_only=auto)

    assert why() == []
    assert why(bounded=True) == ["--from/--to or ending offsets bound the streams (Dagger's reader runs bounded reads)"]
    assert why(event_time=True) == [
        "the SQL reads event time: Dagger's reader aligns the partitions in event time (SPARK_EVENT_TIME_ALIGNMENT)"
    ]
    assert why(event_time=True, SPARK_EVENT_TIME_ALIGNMENT="false") == []  # no alignment asked: Spark's will do
    assert why(DEAD_LETTER_PATH="/tmp/dl") == [
        "the job has a dead-letter output for rejected rows (DEAD_LETTER_KAFKA_TOPIC or DEAD_LETTER_PATH)"
    ]
    stream, sink = why(jvm=False)
    assert "protobuf is decoded by ptars in Python workers here" in stream
    assert sink == "SINK_KAFKA_DATA_TYPE=PROTO is encoded by ptars in Python workers here (SPARK_PROTOBUF_CODEC=ptars)"
    json_out = {k: v for k, v in kafka.items() if k != "SINK_KAFKA_PROTO_MESSAGE"}
    config = load_config(data={**BASE, **json_out, "SINK_KAFKA_DATA_TYPE": "JSON"})
    sinks = [type("S", (), {"dead_letter": None})()]
    assert connector_refusals(config, False, False, sinks, True, protobuf_only=True) == [
        "SINK_KAFKA_DATA_TYPE=JSON (auto takes protobuf sinks only)"
    ]
    assert connector_refusals(config, False, False, sinks, True, protobuf_only=False) == []  # asked for: taken
    config = load_config(data={**BASE, **kafka, "SINK_KAFKA_PRODUCER_CONFIG": '{"ssl.curves.list": "P-256"}'})
    (curves,) = connector_refusals(config, False, False, sinks, True)
    assert "ssl.curves.list has no counterpart in the Java client" in curves
