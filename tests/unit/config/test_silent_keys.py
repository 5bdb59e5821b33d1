"""No silent keys: every key of every settings model is used by the code, or listed with its reason as accepted and
ignored (``dagger/config/ignored.py``), which ``dagger validate``, the start of a run and docs/config.md show."""

from __future__ import annotations

import re
from pathlib import Path

from dagger.config.ignored import IGNORED_KEYS, ignored_keys_set
from dagger.config.model import JobConfig, PythonUdfConfig, SinkConfig, StreamConfig
from dagger.job import load_config
from dagger.job.binding import FORMATS, SINKS, SOURCES
from tests.unit.config.test_config import BASE, STREAM

ROOT = Path(__file__).resolve().parents[3]


def _models() -> dict[str, type]:
    models: dict[str, type] = {
        "job": JobConfig,
        "stream": StreamConfig,
        "sink": SinkConfig,
        "python udfs": PythonUdfConfig,
    }
    models |= {f"sink {name}": plugin.settings for name, plugin in SINKS.plugins().items()}
    models |= {f"source {name}": plugin.settings for name, plugin in SOURCES.plugins().items()}
    models |= {f"input {name}": plugin.settings for name, plugin in FORMATS.plugins().items()}
    return models


def _read_by_code(key: str, sources: list[str]) -> bool:
    """Whether code outside the settings models reads ``key`` (an attribute or a quoted name)."""
    pattern = re.compile(rf"\.{key}\b|[\"']{key}[\"']")
    return any(pattern.search(text) for text in sources)


def test_every_key_is_used_or_listed_as_ignored_with_its_reason():
    code = [p.read_text() for p in (ROOT / "dagger").rglob("*.py") if p.name != "ignored.py"]
    keys = {k for model in _models().values() for k in model.model_fields if k.isupper()}
    silent = sorted(k for k in keys if not _read_by_code(k, code) and k not in IGNORED_KEYS)
    assert not silent, f"keys nothing reads: list them in dagger/config/ignored.py with a reason, or use them: {silent}"
    stale = sorted(k for k in IGNORED_KEYS if _read_by_code(k, code))
    assert not stale, f"listed as ignored but read by the code (remove them from the list): {stale}"
    unknown = sorted(k for k in IGNORED_KEYS if k not in keys)
    assert not unknown, f"listed as ignored but no model accepts them: {unknown}"
    assert all(len(reason) > 20 for reason in IGNORED_KEYS.values())


def test_validate_and_the_docs_name_each_ignored_key_a_config_sets():
    stream = {**STREAM, "SOURCE_KAFKA_NAME": "main"}
    kafka = {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": "127.0.0.1:9092",
        "SINK_KAFKA_TOPIC": "out",
        "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
        "SINK_KAFKA_STREAM": "x",
    }
    config = load_config(data={**BASE, "STREAMS": [stream], "FLINK_PARALLELISM_MAX": "40", **kafka})
    found = dict(ignored_keys_set(config))
    assert set(found) == {"FLINK_PARALLELISM_MAX", "STREAMS[0].SOURCE_KAFKA_NAME", "SINK_KAFKA_STREAM"}
    assert "spark.sql.shuffle.partitions" in found["FLINK_PARALLELISM_MAX"]
    multi = load_config(data={**BASE, "SINKS": [{"SINK_TYPE": "log"}, kafka]})
    assert [k for k, _ in ignored_keys_set(multi)] == ["SINKS[1].SINK_KAFKA_STREAM"]
    docs = (ROOT / "docs" / "config.md").read_text()
    assert all(f"| `{key}` |" in docs for key in IGNORED_KEYS)


def test_flink_parallelism_becomes_sparks_task_counts_unless_spark_conf_says_otherwise():
    from dagger.session.spark import session_conf

    local = session_conf(load_config(data=BASE), "local[2]")
    assert local["spark.sql.shuffle.partitions"] == "2" and "spark.default.parallelism" not in local
    mapped = session_conf(load_config(data={**BASE, "FLINK_PARALLELISM": "6"}), "local[2]")
    assert mapped["spark.sql.shuffle.partitions"] == "6" and mapped["spark.default.parallelism"] == "6"
    wins = load_config(data={**BASE, "FLINK_PARALLELISM": "6", "SPARK_CONF": {"spark.sql.shuffle.partitions": "3"}})
    assert session_conf(wins, None)["spark.sql.shuffle.partitions"] == "3"


def test_a_config_without_sink_type_is_told_that_daggers_default_was_influx():
    assert (
        "Dagger's default is influx"
        in load_config(data={k: v for k, v in BASE.items() if k != "SINK_TYPE"}).sink_type_note
    )
    assert load_config(data={**BASE, "SINK_TYPE": "log"}).sink_type_note is None
    assert load_config(data={**BASE, "SINKS": [{"SINK_TYPE": "log"}]}).sink_type_note is None
