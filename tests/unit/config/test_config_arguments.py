"""Dagger's ways of passing config: a file, ``--KEY value``, ``--encodedArgs``, the environment, and ``--set``."""

from __future__ import annotations

import base64
import json

import pytest

from dagger.config.arguments import decode_encoded_args, parse_arguments
from dagger.errors import DaggerConfigError
from dagger.job import load_config
from tests.unit.config.test_config import STREAM

JOB = {
    "FLINK_JOB_ID": "bookings-per-minute",
    "FLINK_SQL_QUERY": "SELECT order_number FROM bookings",
    "STREAMS": json.dumps([STREAM]),
    "SINK_TYPE": "kafka",
    "SINK_KAFKA_BROKERS": "127.0.0.1:9092",
    "SINK_KAFKA_TOPIC": "out",
    "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingLogMessage",
    "FLINK_WATERMARK_DELAY_MS": "5000",
    "SCHEMA_REGISTRY_STENCIL_URLS": "http://stencil/examples.desc",
}


def tokens(job: dict) -> list[str]:
    return [t for key, value in job.items() for t in (f"--{key}", value)]


def encoded(job: dict) -> str:
    return base64.b64encode(json.dumps(tokens(job)).encode()).decode()


def load(arguments: list[str], environ: dict | None = None, path=None, overrides=None):  # noqa: ANN001, ANN201
    environ = environ or {}
    return load_config(path, overrides, environ=environ, arguments=parse_arguments(arguments, environ))


def test_every_form_gives_the_same_config_as_the_file(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(JOB))
    from_file = load_config(path).model_dump()
    assert load(tokens(JOB)).model_dump() == from_file
    assert load(["--encodedArgs", encoded(JOB)]).model_dump() == from_file
    assert load([f"--encodedArgs={encoded(JOB).rstrip('=')}"]).model_dump() == from_file  # padding optional
    assert load(["ConfigSource=ENVIRONMENT"], environ={**JOB, "PATH": "/bin", "HOME": "/root"}).model_dump() == (
        from_file
    )
    assert load([], environ={**JOB, "ConfigSource": "ENVIRONMENT"}).model_dump() == from_file
    properties = tmp_path / "job.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in JOB.items()))
    assert load([f"ConfigFile={properties}"]).model_dump() == from_file


def test_precedence_is_file_then_environment_then_arguments_then_set(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps({**JOB, "FLINK_JOB_ID": "from-file"}))
    environ = {"ConfigSource": "ENVIRONMENT", "FLINK_JOB_ID": "from-env", "SINK_KAFKA_TOPIC": "env-topic"}
    assert load([], path=path).FLINK_JOB_ID == "from-file"  # the environment is read only when asked
    assert load([], {"FLINK_JOB_ID": "from-env"}, path=path).FLINK_JOB_ID == "from-file"
    config = load([], environ, path=path)
    assert (config.FLINK_JOB_ID, config.single_sink.settings.SINK_KAFKA_TOPIC) == ("from-env", "env-topic")
    config = load(["--FLINK_JOB_ID", "from-args"], environ, path=path)
    assert (config.FLINK_JOB_ID, config.single_sink.settings.SINK_KAFKA_TOPIC) == ("from-args", "env-topic")
    config = load(["--FLINK_JOB_ID", "from-args"], environ, path=path, overrides=["FLINK_JOB_ID=from-set"])
    assert config.FLINK_JOB_ID == "from-set"
    # an alias in a later layer replaces the key of an earlier one
    assert load(["--SQL_QUERY", "SELECT 2 FROM bookings"], path=path).sql == "SELECT 2 FROM bookings"


def test_values_reference_secrets_from_the_environment():
    job = {**JOB, "SINK_KAFKA_BROKERS": "${OUT_BROKERS}"}
    config = load(tokens(job), environ={"OUT_BROKERS": "kafka-0:9092"})
    assert config.single_sink.settings.SINK_KAFKA_BROKERS == "kafka-0:9092"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--encodedArgs", "not base64!"], "--encodedArgs: not the base64 of a JSON array"),
        (["--encodedArgs", base64.b64encode(b'{"a": 1}').decode()], "decodes to dict"),
        (["--FLINK_JOB_ID"], "--FLINK_JOB_ID has no value"),
        (["--encodedArgs"], "--encodedArgs has no value"),
        (["bookings"], "argument 'bookings' is not a config argument; accepted: --KEY value"),
        (["ConfigSource=KAFKA"], "ConfigSource=KAFKA: accepted: ENVIRONMENT, ARGS, FILE"),
    ],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(DaggerConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_arguments(arguments)


def test_no_config_at_all_says_what_is_accepted():
    with pytest.raises(DaggerConfigError, match="no job config: give a file"):
        load([])


def test_unknown_keys_in_arguments_are_named_like_in_a_file():
    with pytest.raises(DaggerConfigError, match="FLINK_JOB_IDD: unknown key; did you mean FLINK_JOB_ID"):
        load([*tokens(JOB), "--FLINK_JOB_IDD", "x"])


def test_encoded_args_round_trip_url_safe_base64():
    text = json.dumps(["--SQL_QUERY", "SELECT a>>b, c??d FROM t"])
    assert decode_encoded_args(base64.urlsafe_b64encode(text.encode()).decode()) == json.loads(text)


def test_config_tokens_are_told_apart_from_the_clis_own_options():
    from dagger.config.arguments import split_config_tokens

    argv = ["job.json", "--FLINK_JOB_ID", "x", "--set", "A=b", "--encodedArgs", "QQ==", "ConfigSource=ENVIRONMENT"]
    argv += ["--available-now", "--SINK_TYPE=log", "--checkpoint-dir", "/ck"]
    others, config = split_config_tokens(argv)
    assert others == ["job.json", "--set", "A=b", "--available-now", "--checkpoint-dir", "/ck"]
    assert config == ["--FLINK_JOB_ID", "x", "--encodedArgs", "QQ==", "ConfigSource=ENVIRONMENT", "--SINK_TYPE=log"]
