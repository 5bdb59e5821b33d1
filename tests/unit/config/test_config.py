"""Config loading and validation: every error path gives one clear message and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from dagger.job.reference import render_reference
from tests.conftest import ROOT

STREAM = {
    "INPUT_SCHEMA_TABLE": "bookings",
    "SOURCE_KAFKA_TOPIC_NAMES": "bookings-.*",
    "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
    "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
    "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
}
BASE = {"FLINK_SQL_QUERY": "SELECT * FROM bookings", "STREAMS": [STREAM]}


def error_of(**changes) -> str:
    data = {**BASE, **changes}
    with pytest.raises(DaggerConfigError) as info:
        load_config(data=data)
    return str(info.value)


def test_native_json_and_json_in_a_string_load_the_same():
    native = load_config(data=BASE)
    stringly = load_config(data={"SQL_QUERY": BASE["FLINK_SQL_QUERY"], "STREAMS": json.dumps([STREAM])})
    assert native.model_dump() == stringly.model_dump()
    assert native.STREAMS[0].format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX == 5
    assert native.FLINK_ROWTIME_ATTRIBUTE_NAME == "rowtime"
    assert native.STREAMS[0].SOURCE_DETAILS[0].SOURCE_NAME == "KAFKA_CONSUMER"


def test_properties_file_loads(tmp_path):
    path = tmp_path / "local.properties"
    path.write_text(
        f"FLINK_SQL_QUERY=SELECT 1 FROM bookings\nSTREAMS={json.dumps([STREAM])}\n# comment\nSINK_TYPE=log\n"
    )
    config = load_config(path)
    assert config.sql == "SELECT 1 FROM bookings"
    assert config.single_sink.SINK_TYPE == "log"


def test_env_substitution_and_default():
    data = {**BASE, "SINK_KAFKA_BROKERS": "${OUT_BROKERS}", "FLINK_JOB_ID": "${JOB:-fallback}"}
    config = load_config(data=data, environ={"OUT_BROKERS": "k:1"})
    assert config.single_sink.model_extra["SINK_KAFKA_BROKERS"] == "k:1"  # another sink's key: kept, unused
    assert config.FLINK_JOB_ID == "fallback"
    with pytest.raises(DaggerConfigError, match=r"SINK_KAFKA_BROKERS: environment variable OUT_BROKERS is not set"):
        load_config(data=data, environ={})


def test_set_overrides_top_level_and_stream_keys():
    config = load_config(
        data=BASE,
        overrides=[
            "SINK_TYPE=kafka",
            "SINK_KAFKA_BROKERS=b:1",
            "SINK_KAFKA_TOPIC=o",
            "SINK_KAFKA_PROTO_MESSAGE=x.Y",
            "STREAMS[0].SOURCE_KAFKA_TOPIC_NAMES=other",
        ],
    )
    assert config.single_sink.SINK_TYPE == "kafka"
    assert config.STREAMS[0].settings.SOURCE_KAFKA_TOPIC_NAMES == "other"
    with pytest.raises(DaggerConfigError, match="must look like KEY=VALUE"):
        load_config(data=BASE, overrides=["SINK_TYPE"])


def test_unknown_key_suggests_the_closest():
    assert "SINK_TPYE: unknown key; did you mean SINK_TYPE?" in error_of(SINK_TPYE="log")
    message = error_of(STREAMS=[{**STREAM, "SOURCE_KAFKA_TOPIC_NAME": "x"}])
    assert "STREAMS[0].SOURCE_KAFKA_TOPIC_NAME: unknown key; did you mean SOURCE_KAFKA_TOPIC_NAMES?" in message


def test_missing_required_key():
    with pytest.raises(DaggerConfigError, match="FLINK_SQL_QUERY: is required"):
        load_config(data={"STREAMS": [STREAM]})
    assert "SOURCE_KAFKA_TOPIC_NAMES is required for Kafka stream 'bookings'" in error_of(
        STREAMS=[{k: v for k, v in STREAM.items() if k != "SOURCE_KAFKA_TOPIC_NAMES"}]
    )


def test_wrong_type_and_invalid_enum():
    assert "FLINK_WATERMARK_DELAY_MS: 'ten' is not an integer" in error_of(FLINK_WATERMARK_DELAY_MS="ten")
    message = error_of(SINK_TYPE="elastic")
    assert "SINK_TYPE: 'elastic' is not accepted; accepted: bigquery, influx, kafka, log" in message
    message = error_of(STREAMS=[{**STREAM, "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earlist"}])
    assert "AUTO_OFFSET_RESET: 'earlist' is not accepted; accepted: 'latest' or 'earliest'" in message
    assert "STREAMS: is not valid JSON" in error_of(STREAMS="[{")


def test_invalid_source_details_combination():
    message = error_of(
        STREAMS=[{**STREAM, "SOURCE_DETAILS": [{"SOURCE_NAME": "KAFKA_SOURCE", "SOURCE_TYPE": "BOUNDED"}]}]
    )
    assert "combines SOURCE_NAME=KAFKA_SOURCE with SOURCE_TYPE=BOUNDED" in message
    assert "accepted: KAFKA_CONSUMER+UNBOUNDED, KAFKA_SOURCE+UNBOUNDED, PARQUET_SOURCE+BOUNDED" in message
    two = [{"SOURCE_NAME": "KAFKA_SOURCE", "SOURCE_TYPE": "UNBOUNDED"}] * 2
    assert "must hold exactly one element, got 2" in error_of(STREAMS=[{**STREAM, "SOURCE_DETAILS": two}])


def test_processor_shapes_are_validated_before_the_features_exist():
    bad = {"internal_source": [{"output_field": "*", "type": "sqll", "value": "*"}]}
    message = error_of(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(bad))
    assert "PROCESSOR_POSTPROCESSOR_CONFIG.internal_source[0].type: 'sqll' is not accepted" in message
    reserved = {
        "table_transformers": [
            {
                "table_name": "bookings",
                "transformers": [
                    {
                        "transformation_class": "InvalidRecordFilterTransformer",
                        "transformation_arguments": {"table_name": "x"},
                    }
                ],
            }
        ]
    }
    assert "'table_name': it is reserved" in error_of(
        PROCESSOR_PREPROCESSOR_ENABLE=True, PROCESSOR_PREPROCESSOR_CONFIG=reserved
    )


def test_kafka_sink_requires_its_keys_and_dead_letter_needs_a_topic():
    assert "SINK_KAFKA_BROKERS is required when SINK_TYPE is 'kafka'" in error_of(SINK_TYPE="kafka")
    message = error_of(STREAMS=[{**STREAM, "SOURCE_KAFKA_INVALID_RECORD_POLICY": "dead-letter"}])
    assert "no destination: set DEAD_LETTER_KAFKA_TOPIC (+ _BROKERS) or DEAD_LETTER_PATH" in message


def test_cli_exits_2_on_a_bad_config_without_starting_spark(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**BASE, "SINK_TPYE": "log"}))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "dagger", "run", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 2
    assert "did you mean SINK_TYPE?" in result.stderr
    assert "SparkContext" not in result.stderr and "log4j" not in result.stderr
    assert time.monotonic() - started < 20


def test_cli_exits_2_on_an_unknown_message(tmp_path):
    path = tmp_path / "job.json"
    stream = {**STREAM, "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLog"}
    path.write_text(
        json.dumps({**BASE, "STREAMS": [stream], "SCHEMA_REGISTRY_STENCIL_URLS": "descriptors/examples.desc"})
    )
    result = subprocess.run(
        [sys.executable, "-m", "dagger", "run", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 2
    assert "message 'dagger.examples.BookingLog' is not in the descriptor sets" in result.stderr
    assert "did you mean" in result.stderr and "dagger.examples.BookingLogMessage" in result.stderr


def test_config_reference_is_generated_and_current():
    generated = render_reference()
    assert "| `SOURCE_KAFKA_TOPIC_NAMES` |" in generated and "| `SPARK_MAX_RECORDS_PER_TRIGGER` |" in generated
    assert (ROOT / "docs" / "config.md").read_text() == generated, "run `make docs` to regenerate docs/config.md"


def test_several_sinks_have_their_own_validated_keys():
    kafka = {"SINK_TYPE": "kafka", "SINK_KAFKA_BROKERS": "b:9092", "SINK_KAFKA_TOPIC": "out"}
    influx = {"SINK_TYPE": "influx", "SINK_INFLUX_URL": "http://i:8086", "SINK_INFLUX_DB_NAME": "d"}
    influx["SINK_INFLUX_MEASUREMENT_NAME"] = "m"
    config = load_config(data={**BASE, "SINKS": json.dumps([{**kafka, "SINK_KAFKA_PROTO_MESSAGE": "p.M"}, influx])})
    assert [(name, c.SINK_TYPE) for name, c in config.sink_configs] == [("kafka", "kafka"), ("influx", "influx")]
    message = error_of(SINKS=[kafka, influx])
    assert "SINKS[0]: SINK_KAFKA_PROTO_MESSAGE is required when SINK_TYPE is 'kafka'" in message
    assert "SINK_INFLUX_URLL" in error_of(SINKS=[{**influx, "SINK_INFLUX_URLL": "x"}])
    assert "SINK_TYPE set at the top level together with SINKS" in error_of(SINK_TYPE="log", SINKS=[influx])
    assert "SINK_NAME must be unique across SINKS; repeated: a" in error_of(
        SINKS=[{"SINK_NAME": "a"}, {"SINK_NAME": "a"}]
    )
    # two sinks of one type get numbered names
    assert [n for n, _ in load_config(data={**BASE, "SINKS": [{}, {}]}).sink_configs] == ["log-0", "log-1"]


def test_sink_type_that_does_not_exist_is_an_error_not_influx():
    message = error_of(SINK_TYPE="elasticsearch")
    assert "SINK_TYPE: 'elasticsearch' is not accepted; accepted: bigquery, influx, kafka, log" in message


def test_dead_letter_destination_keys():
    assert "DEAD_LETTER_KAFKA_TOPIC and DEAD_LETTER_PATH are exclusive" in error_of(
        DEAD_LETTER_KAFKA_TOPIC="d", DEAD_LETTER_KAFKA_BROKERS="b:1", DEAD_LETTER_PATH="/tmp/x"
    )
    assert "DEAD_LETTER_KAFKA_BROKERS is required with DEAD_LETTER_KAFKA_TOPIC" in error_of(DEAD_LETTER_KAFKA_TOPIC="d")
    stream = {**STREAM, "SOURCE_KAFKA_INVALID_RECORD_POLICY": "dead-letter"}
    assert load_config(data={**BASE, "STREAMS": [stream], "DEAD_LETTER_PATH": "/tmp/dl"}).has_dead_letter
    unknown = error_of(SINK_ERROR_TYPES_FOR_FAILURE="SINK_4XX_ERROR,OOPS")
    assert "unknown error type OOPS; accepted: DESERIALIZATION_ERROR" in unknown


def test_json_in_a_string_is_read_as_leniently_as_daggers_gson_with_one_warning(caplog):
    lenient = (
        '{"external_source": {"pg": [{"host":localhost, "port": 5432, user: dagger, "password": \'secret\', '
        '"database": "d", "query_pattern": "SELECT 1", "stream_timeout": 5000, "capacity": 10, '
        '"connect_timeout": 1000, "idle_timeout": 1000, "output_mapping": {"x": "y"},}]}}'
    )
    with caplog.at_level("WARNING", logger="dagger.config.model"):
        config = load_config(
            data={**BASE, "PROCESSOR_POSTPROCESSOR_ENABLE": "true", "PROCESSOR_POSTPROCESSOR_CONFIG": lenient}
        )
    ((kind, index, pg),) = config.PROCESSOR_POSTPROCESSOR_CONFIG.lookups
    assert (kind, index, type(pg).__name__) == ("pg", 0, "PgLookupSettings")
    assert (pg.host, pg.port, pg.user, pg.password) == ("localhost", 5432, "dagger", "secret")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings
    assert warnings[0] == (
        "PROCESSOR_POSTPROCESSOR_CONFIG is not strict JSON (Expecting value at character 36); read leniently, as "
        "Dagger does"
    )
    # what even a lenient reader cannot read is still an error naming the key and the position
    message = error_of(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG='{"external_source": {')
    assert (
        "PROCESSOR_POSTPROCESSOR_CONFIG: is not valid JSON (Expecting property name enclosed in double quotes at character 21)"
        in message
    )


def test_a_lookups_keys_are_validated_by_its_settings_model_and_an_unknown_lookup_is_named():
    post = {"external_source": {"http": [{"endpoint": "http://h", "verb": "get", "stream_timeout": 1}]}}
    message = error_of(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post))
    assert "PROCESSOR_POSTPROCESSOR_CONFIG.external_source.http[0].capacity: is required" in message
    assert "PROCESSOR_POSTPROCESSOR_CONFIG.external_source.http[0].request_pattern: is required" in message
    post = {"external_source": {"http": ["http://h"]}}
    message = error_of(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post))
    assert 'PROCESSOR_POSTPROCESSOR_CONFIG.external_source.http[0]: expected a JSON object, got "http://h"' in message
    post = {"external_source": {"htp": []}}
    message = error_of(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post))
    assert (
        "PROCESSOR_POSTPROCESSOR_CONFIG.external_source.htp: unknown lookup; did you mean http?; accepted: http, es, "
        "pg, grpc" in message
    )
