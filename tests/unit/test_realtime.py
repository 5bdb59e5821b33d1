"""Real-time mode's planning that needs no Spark: the options of Spark's Kafka source from a stream's keys (a job
in real-time mode runs in tests/integration/sources/test_realtime.py)."""

from __future__ import annotations

import json

from dagger.job import load_config
from dagger.realtime.source import kafka_options
from tests.unit.config.test_config import BASE, STREAM


def test_additional_consumer_configurations_reach_sparks_kafka_source_as_kafka_options():
    extra = {"fetch.min.bytes": "4096", "client.rack": "zone-b"}
    stream = {**STREAM, "SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS": json.dumps(extra)}
    config = load_config(data={**BASE, "STREAMS": [stream]})
    options = kafka_options(config.STREAMS[0], config, resolve=False)  # resolve=False: no consumer group asked
    assert (options["kafka.fetch.min.bytes"], options["kafka.client.rack"]) == ("4096", "zone-b")


def test_avro_and_confluent_framed_json_streams_are_refused_naming_why_and_protobuf_is_taken():
    from dagger.realtime import stream_refusals

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
