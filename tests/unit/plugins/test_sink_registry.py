"""The sink registry: a sink of one's own registers like a built-in one, validated, documented and run."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import Any

import pyarrow as pa
import pytest
from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from dagger.job.reference import render_reference
from dagger.plugins.sink import SINKS, Sink, SinkSettings, SinkWriter, register_sink
from tests.conftest import install_plugin_package

STREAM = {
    "INPUT_SCHEMA_TABLE": "bookings",
    "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
    "SOURCE_DETAILS": [{"SOURCE_NAME": "PARQUET_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
    "SOURCE_PARQUET_FILE_PATHS": ["/nowhere"],
}
BASE = {"FLINK_SQL_QUERY": "SELECT * FROM bookings", "STREAMS": [STREAM]}


class JsonLinesSettings(SinkSettings):
    """JSON lines: every row appended to a local file (a test sink)."""

    SINK_JSONL_PATH: str = Field(description="The file rows are appended to.")
    SINK_JSONL_EVERY: int = Field(1, gt=0, description="Keep one row in this many.")


class _JsonLinesWriter(SinkWriter):
    def __init__(self, sink: JsonLinesSink):
        self.sink, self.rows = sink, []

    def write(self, batch: pa.RecordBatch) -> None:
        self.rows.extend(batch.to_pylist()[:: self.sink.every])

    def flush(self) -> list[dict]:
        self.sink.count("written", len(self.rows))
        return self.rows


class JsonLinesSink(Sink):
    name = "jsonl"

    def __init__(self, path: str, every: int):
        self.path, self.every = path, every

    @classmethod
    def from_settings(cls, settings: JsonLinesSettings, env: Any) -> JsonLinesSink:
        return cls(settings.SINK_JSONL_PATH, settings.SINK_JSONL_EVERY)

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _JsonLinesWriter(self)

    def commit(self, results: list[Any], batch_id: int) -> None:
        with open(self.path, "a") as out:
            for rows in results:
                out.writelines(json.dumps(row, default=str) + "\n" for row in rows)


@pytest.fixture
def jsonl():
    plugin = register_sink("jsonl", JsonLinesSettings, JsonLinesSink.from_settings)
    yield plugin
    SINKS.entries.pop("jsonl", None)


def error_of(**changes) -> str:
    with pytest.raises(DaggerConfigError) as info:
        load_config(data={**BASE, **changes})
    return str(info.value)


def test_a_registered_sink_is_a_sink_type_with_its_keys_validated_and_documented(jsonl):
    config = load_config(data={**BASE, "SINK_TYPE": "jsonl", "SINK_JSONL_PATH": "/tmp/x", "SINK_JSONL_EVERY": "3"})
    ((name, entry),) = config.sink_configs
    assert (name, entry.settings) == ("jsonl", JsonLinesSettings(SINK_JSONL_PATH="/tmp/x", SINK_JSONL_EVERY=3))
    assert "SINK_JSONL_PATH: is required" in error_of(SINK_TYPE="jsonl")
    assert "SINK_JSONL_EVERY: '0' input should be greater than 0" in error_of(
        SINK_TYPE="jsonl", SINK_JSONL_PATH="p", SINK_JSONL_EVERY="0"
    )
    assert "SINK_JSONL_PTH: unknown key; did you mean SINK_JSONL_PATH?" in error_of(
        SINK_TYPE="jsonl", SINK_JSONL_PTH="p"
    )
    # in SINKS too, each problem named with its entry
    message = error_of(SINKS=[{"SINK_TYPE": "log"}, {"SINK_TYPE": "jsonl", "SINK_JSONL_EVERY": "x"}])
    assert "SINKS[1].SINK_JSONL_PATH: is required" in message
    assert "SINKS[1].SINK_JSONL_EVERY: 'x' is not an integer" in message
    reference = render_reference()
    assert "### `SINK_TYPE=jsonl`" in reference and "| `SINK_JSONL_EVERY` | integer | `1` | Keep one" in reference
    assert "jsonl" in error_of(SINK_TYPE="nope")  # listed among the accepted types


def test_another_sinks_keys_are_accepted_and_ignored_as_dagger_does():
    config = load_config(data={**BASE, "SINK_TYPE": "log", "SINK_KAFKA_TOPIC": "left-over", "SINK_INFLUX_URL": "u"})
    assert config.single_sink.SINK_TYPE == "log" and not type(config.single_sink.settings).model_fields


def test_registration_refuses_keys_outside_the_sink_namespace():
    class Bad(SinkSettings):
        URL: str = "x"

    with pytest.raises(ValueError, match="settings keys must start with SINK_"):
        register_sink("bad", Bad, lambda s, e: None)

    class Shadow(SinkSettings):
        SINK_NAME: str = "x"

    with pytest.raises(ValueError, match="must not be SINKS, SINK_ERROR_TYPES_FOR_FAILURE, SINK_NAME, SINK_TYPE"):
        register_sink("shadow", Shadow, lambda s, e: None)
    with pytest.raises(ValueError, match="lower case"):
        register_sink("My Sink", JsonLinesSettings, JsonLinesSink.from_settings)
    assert "bad" not in SINKS.entries and "shadow" not in SINKS.entries


def test_an_installed_packages_entry_point_registers_its_sink(tmp_path, monkeypatch):
    install_plugin_package(
        tmp_path,
        monkeypatch,
        SINKS,
        "webhook_sink",
        textwrap.dedent(
            """
            from pydantic import Field
            from dagger.plugins.sink import Sink, SinkSettings, register_sink

            class WebhookSettings(SinkSettings):
                '''Webhook: rows POSTed to a URL.'''
                SINK_WEBHOOK_URL: str = Field(description="Where rows go.")

            class WebhookSink(Sink):
                name = "webhook"
                def __init__(self, url):
                    self.url = url
                @classmethod
                def from_settings(cls, settings, env):
                    return cls(settings.SINK_WEBHOOK_URL)
                def writer(self, partition_id, batch_id):
                    raise NotImplementedError

            register_sink("webhook", WebhookSettings, WebhookSink.from_settings)
            """
        ),
        "webhook",
    )
    try:
        assert "webhook" in SINKS.plugins()
        config = load_config(data={**BASE, "SINK_TYPE": "webhook", "SINK_WEBHOOK_URL": "http://h/rows"})
        from dagger.catalog import build_sinks

        (sink,) = build_sinks(config, None)
        assert (type(sink).__name__, sink.url, sink.label) == ("WebhookSink", "http://h/rows", "webhook")
    finally:
        SINKS.entries.pop("webhook", None)
        sys.modules.pop("webhook_sink", None)


def test_an_entry_point_that_does_not_register_is_named(tmp_path, monkeypatch):
    install_plugin_package(tmp_path, monkeypatch, SINKS, "silent_sink", "VALUE = 1\n", "silent")
    try:
        with pytest.raises(
            DaggerConfigError,
            match=r"sink 'silent': module 'silent_sink' was imported but registered no sink named 'silent'",
        ):
            SINKS.plugins()
    finally:
        sys.modules.pop("silent_sink", None)


class FlushedSettings(JsonLinesSettings):
    """JSON lines written at each checkpoint (a test sink declaring what it can do)."""

    flushes_at_checkpoint = True
    ignored_keys = {"SINK_KAFKA_TOPIC": "a file has no topic"}


@pytest.fixture
def flushed():
    plugin = register_sink("flushed", FlushedSettings, JsonLinesSink.from_settings)
    yield plugin
    SINKS.entries.pop("flushed", None)


def test_what_a_sink_declares_is_what_the_config_the_docs_and_dagger_test_ask_of_it(jsonl, flushed):
    """Capabilities, not names: the trigger interval, the ignored keys, real-time mode and dagger test ask the
    sink's plugin, so a sink of one's own gets the same treatment as a built-in one that declares the same."""
    from dagger.config.ignored import ignored_keys_set
    from dagger.kafka.spark_connector import refusals
    from dagger.testing.decoding import expected_form, written

    entry = {"SINK_JSONL_PATH": "/tmp/x", "FLINK_CHECKPOINT_INTERVAL_MS": "20000"}
    declared = load_config(data={**BASE, **entry, "SINK_TYPE": "flushed", "SINK_KAFKA_TOPIC": "t"})
    plain = load_config(data={**BASE, **entry, "SINK_TYPE": "jsonl", "SINK_KAFKA_TOPIC": "t"})
    assert (declared.trigger_interval_ms, plain.trigger_interval_ms) == (20_000, 0)  # Dagger's write cadence
    assert dict(ignored_keys_set(declared)) == {"SINK_KAFKA_TOPIC": "a file has no topic"}
    assert ignored_keys_set(plain) == []
    assert "| `SINK_KAFKA_TOPIC` (`SINK_TYPE=flushed`) | a file has no topic |" in render_reference()
    assert any("writes one Kafka sink" in why for why in refusals(plain, False, False, False, None))  # not declared
    sink = JsonLinesSink("/tmp/x", 1)
    sink.capture = "/tmp/nowhere"
    with pytest.raises(ValueError, match="dagger test cannot read back what a jsonl sink writes"):
        written(sink)
    assert expected_form(sink, {"a": None}, partial=False) == {"a": None}  # compared as the case gives it
