"""Real-time mode's planning that needs no Spark: the options of Spark's Kafka source from a stream's keys (a job
in real-time mode runs in tests/integration/sources/test_realtime.py)."""

from __future__ import annotations

import json

from dagger.job import load_config
from dagger.realtime import _kafka_options
from tests.unit.config.test_config import BASE, STREAM


def test_additional_consumer_configurations_reach_sparks_kafka_source_as_kafka_options():
    extra = {"fetch.min.bytes": "4096", "client.rack": "zone-b"}
    stream = {**STREAM, "SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS": json.dumps(extra)}
    config = load_config(data={**BASE, "STREAMS": [stream]})
    options = _kafka_options(config.STREAMS[0], config, resolve=False)  # resolve=False: no consumer group asked
    assert (options["kafka.fetch.min.bytes"], options["kafka.client.rack"]) == ("4096", "zone-b")


def test_avro_and_confluent_framed_streams_are_refused_naming_why():
    from dagger.realtime import stream_refusals

    plain_json = {k: v for k, v in STREAM.items() if not k.startswith("INPUT_SCHEMA_") or k == "INPUT_SCHEMA_TABLE"}
    plain_json.update(INPUT_DATATYPE="JSON", INPUT_SCHEMA_JSON_SCHEMA='{"type": "object", "properties": {}}')
    framed = {**plain_json, "INPUT_SCHEMA_WIRE_FORMAT": "confluent", "INPUT_SCHEMA_TABLE": "framed"}
    avro = {**plain_json, "INPUT_DATATYPE": "AVRO", "INPUT_SCHEMA_TABLE": "avro"}
    del avro["INPUT_SCHEMA_JSON_SCHEMA"]
    config = load_config(data={**BASE, "STREAMS": [plain_json, framed, avro]})
    assert stream_refusals(config.STREAMS[0]) == []
    for stream, what in (
        (config.STREAMS[1], "JSON records (wire format confluent)"),
        (config.STREAMS[2], "AVRO records (wire format plain)"),
    ):
        (why,) = stream_refusals(stream)
        assert f"real-time mode reads plain JSON records only; this stream's {what}" in why, why
