"""The Kafka sink its keys build: the librdkafka producer settings, with no broker (producing to one is
tests/integration)."""

from __future__ import annotations

from dagger.catalog import build_sinks
from dagger.job import load_config
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE

KAFKA = {
    "SINK_TYPE": "kafka",
    "SINK_KAFKA_BROKERS": "out:9092",
    "SINK_KAFKA_TOPIC": "summaries",
    "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
}


def test_sink_kafka_linger_ms_is_the_producers_linger_ms():
    (sink,) = build_sinks(load_config(data={**BASE, **KAFKA, "SINK_KAFKA_LINGER_MS": "25"}), example_descriptors())
    assert sink.producer_config["linger.ms"] == "25"
    assert sink.producer_config["bootstrap.servers"] == "out:9092"


def test_with_several_sinks_each_problem_names_its_sink():
    import json

    import pyarrow as pa

    from dagger.catalog import sink_problems

    keyed = {**KAFKA, "SINK_KAFKA_DATA_TYPE": "JSON", "SINK_KAFKA_KEY_COLUMNS": "customer_id"}
    del keyed["SINK_KAFKA_PROTO_MESSAGE"]
    output = pa.schema([("order_number", pa.string()), ("service_area_id", pa.int64())])
    one = build_sinks(load_config(data={**BASE, **keyed}), example_descriptors())
    assert sink_problems(one, output) == [
        "SINK_KAFKA_KEY_COLUMNS: customer_id not among the output columns (order_number, service_area_id)"
    ]
    two = [{**keyed, "SINK_NAME": "by-customer"}, {**keyed, "SINK_NAME": "plain", "SINK_KAFKA_KEY_COLUMNS": ""}]
    sinks = build_sinks(load_config(data={**BASE, "SINKS": json.dumps(two)}), example_descriptors())
    assert sink_problems(sinks, output) == [
        "sink 'by-customer': SINK_KAFKA_KEY_COLUMNS: customer_id not among the output columns (order_number, "
        "service_area_id)"
    ]


def test_a_data_type_no_registered_format_writes_is_refused_naming_the_ones_that_do():
    import pytest

    from dagger.errors import DaggerConfigError

    for key in ("SINK_KAFKA_DATA_TYPE", "SINK_KAFKA_KEY_DATA_TYPE"):
        with pytest.raises(DaggerConfigError) as refused:
            load_config(data={**BASE, **KAFKA, key: "CSV"})
        assert f"{key}='CSV': a sink writes AVRO, JSON, PROTO" in str(refused.value)


def test_a_part_holds_only_the_keys_its_format_reads():
    """A JSON value with SINK_KAFKA_PROTO_MESSAGE left in the config (as ported Dagger configs have it) is not typed
    by that message, and a PROTO key is not shaped by the value's JSON Schema."""
    from dagger.kafka.sink.records import RecordPart

    config = load_config(
        data={
            **BASE,
            **KAFKA,
            "SINK_KAFKA_DATA_TYPE": "JSON",
            "SINK_KAFKA_JSON_SCHEMA": '{"type": "object", "properties": {"order_number": {"type": "string"}}}',
            "SINK_KAFKA_PROTO_KEY": "dagger.examples.BookingSummaryMessage",
        }
    )
    settings = config.sink_configs[0][1].settings
    value = RecordPart.of(settings, "value", example_descriptors())
    key = RecordPart.of(settings, "key", example_descriptors())
    assert (value.data_type, value.message, value.json_schema is not None) == ("JSON", None, True)
    assert (key.data_type, key.message, key.json_schema) == ("PROTO", "dagger.examples.BookingSummaryMessage", None)
    assert settings.output_message() is None  # a JSON sink types no lookup output
