"""No silent keys: every key of every settings model is used by the code, or listed with its reason as accepted and
ignored (``dagger/config/ignored.py``), which ``dagger validate``, the start of a run and docs/config.md show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagger.config.ignored import IGNORED_KEYS, ignored_keys_set
from dagger.config.model import JobConfig, PythonUdfConfig, SinkConfig, StreamConfig
from dagger.errors import DaggerConfigError
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


def _ignored() -> dict[str, str]:
    """Every key listed as accepted and ignored: the job's (``IGNORED_KEYS``) and each plugin's own
    (``ignored_keys`` of its settings model)."""
    listed = dict(IGNORED_KEYS)
    for registry in (SINKS, SOURCES):
        for plugin in registry.plugins().values():
            listed |= plugin.settings.ignored_keys
    return listed


def _read_by_code(key: str, sources: list[str]) -> bool:
    """Whether code outside the settings models reads ``key`` (an attribute or a quoted name; a quoted name followed
    by ``:`` is a dict's key, as an ``ignored_keys`` entry is, and reads nothing)."""
    pattern = re.compile(rf"\.{key}\b|[\"']{key}[\"'](?!\s*:)")
    return any(pattern.search(text) for text in sources)


def test_every_key_is_used_or_listed_as_ignored_with_its_reason():
    code = [p.read_text() for p in (ROOT / "dagger").rglob("*.py") if p.name != "ignored.py"]
    keys = {k for model in _models().values() for k in model.model_fields if k.isupper()}
    listed = _ignored()
    silent = sorted(k for k in keys if not _read_by_code(k, code) and k not in listed)
    assert not silent, (
        "keys nothing reads: list them with a reason (dagger/config/ignored.py for the job's, the plugin settings' "
        f"ignored_keys for a plugin's), or use them: {silent}"
    )
    # a key a plugin lists for another type, which that type reads (BigQuery lists the Kafka sink's key message),
    # cannot be stale; every other listed key can
    owners = {k: {n for n, m in _models().items() if k in m.model_fields} for k in listed}
    listers = {k: {f"sink {n}" for n, p in SINKS.plugins().items() if k in p.settings.ignored_keys} for k in listed}
    listers = {
        k: v | {f"source {n}" for n, p in SOURCES.plugins().items() if k in p.settings.ignored_keys}
        for k, v in listers.items()
    }
    checkable = [k for k in listed if k in IGNORED_KEYS or owners[k] <= listers[k]]
    stale = sorted(k for k in checkable if _read_by_code(k, code))
    assert not stale, f"listed as ignored but read by the code (remove them from the list): {stale}"
    unknown = sorted(k for k in listed if k not in keys)
    assert not unknown, f"listed as ignored but no model accepts them: {unknown}"
    assert all(len(reason) > 20 for reason in listed.values())


def test_validate_and_the_docs_name_each_ignored_key_a_config_sets():
    stream = {
        "INPUT_SCHEMA_TABLE": "bookings",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
        "SOURCE_PARQUET_FILE_PATHS": '["/data/bookings/dt=2026-01-01"]',
        "SOURCE_PARQUET_SCHEMA_MATCH_STRATEGY": "SAME_SCHEMA_WITH_FAIL_ON_MISMATCH",  # the Parquet source lists it as ignored
        "SOURCE_DETAILS": [{"SOURCE_NAME": "PARQUET_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
    }
    kafka = {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": "127.0.0.1:9092",
        "SINK_KAFKA_TOPIC": "out",
        "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
        "SINK_KAFKA_STREAM": "x",
    }
    config = load_config(data={**BASE, "STREAMS": [stream], "FLINK_PARALLELISM_MAX": "40", **kafka})
    found = dict(ignored_keys_set(config))
    assert set(found) == {
        "FLINK_PARALLELISM_MAX",
        "STREAMS[0].SOURCE_PARQUET_SCHEMA_MATCH_STRATEGY",
        "SINK_KAFKA_STREAM",
    }
    assert "spark.sql.shuffle.partitions" in found["FLINK_PARALLELISM_MAX"]
    multi = load_config(data={**BASE, "SINKS": [{"SINK_TYPE": "log"}, kafka]})
    assert [k for k, _ in ignored_keys_set(multi)] == ["SINKS[1].SINK_KAFKA_STREAM"]
    docs = (ROOT / "docs" / "config.md").read_text()
    assert all(f"| `{key}` |" in docs for key in IGNORED_KEYS)
    assert all(f"| `{key}` (`" in docs for key in set(_ignored()) - set(IGNORED_KEYS))


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


# -- Dagger's keys mapped where Spark has the same thing ------------------------------------------------------


def test_flinks_per_partition_watermark_key_decides_event_time_alignment_when_set():
    assert load_config(data=BASE).event_time_alignment is True  # unset: SPARK_EVENT_TIME_ALIGNMENT, aligned
    assert load_config(data={**BASE, "SPARK_EVENT_TIME_ALIGNMENT": "false"}).event_time_alignment is False
    one = load_config(data={**BASE, "FLINK_WATERMARK_PER_PARTITION_ENABLE": "false"})
    assert one.event_time_alignment is False  # one watermark across partitions, as Flink without the option
    assert load_config(data={**BASE, "FLINK_WATERMARK_PER_PARTITION_ENABLE": "true"}).event_time_alignment is True
    both = {**BASE, "FLINK_WATERMARK_PER_PARTITION_ENABLE": "true", "SPARK_EVENT_TIME_ALIGNMENT": "false"}
    with pytest.raises(DaggerConfigError, match="FLINK_WATERMARK_PER_PARTITION_ENABLE and SPARK_EVENT_TIME_ALIGNMENT"):
        load_config(data=both)


def test_flinks_checkpoint_interval_is_real_time_modes_and_the_cadence_of_sinks_dagger_flushes_at_checkpoints():
    influx = {"SINK_TYPE": "influx", "SINK_INFLUX_URL": "http://127.0.0.1:8086", "SINK_INFLUX_DB_NAME": "d",
              "SINK_INFLUX_MEASUREMENT_NAME": "m"}  # fmt: skip
    plain = load_config(data=BASE)
    assert (plain.realtime_checkpoint_ms, plain.trigger_interval_ms) == (60_000, 0)
    flink = load_config(data={**BASE, "FLINK_CHECKPOINT_INTERVAL_MS": "20000"})
    assert (flink.realtime_checkpoint_ms, flink.trigger_interval_ms) == (20_000, 0)  # the log sink: rows flow
    spark = {**BASE, "FLINK_CHECKPOINT_INTERVAL_MS": "20000", "SPARK_REALTIME_CHECKPOINT_INTERVAL_MS": "9000"}
    assert load_config(data=spark).realtime_checkpoint_ms == 9_000
    flushed = load_config(data={**BASE, **influx, "FLINK_CHECKPOINT_INTERVAL_MS": "20000"})
    assert flushed.trigger_interval_ms == 20_000  # Dagger writes InfluxDB at each checkpoint: the same cadence
    given = load_config(
        data={**BASE, **influx, "FLINK_CHECKPOINT_INTERVAL_MS": "20000", "SPARK_TRIGGER_INTERVAL_MS": "0"}
    )
    assert given.trigger_interval_ms == 0
    with pytest.raises(DaggerConfigError, match="FLINK_CHECKPOINT_INTERVAL_MS=1000 is real-time mode's checkpoint"):
        load_config(data={**BASE, "FLINK_CHECKPOINT_INTERVAL_MS": "1000", "SPARK_TRIGGER_MODE": "real-time"})


def test_source_kafka_name_is_the_streams_telemetry_tag():
    from types import SimpleNamespace

    from dagger.job import JobCounters
    from dagger.telemetry.metrics import JobMetrics

    named = {**STREAM, "SOURCE_KAFKA_NAME": "main-cluster"}
    other = {**STREAM, "INPUT_SCHEMA_TABLE": "rides"}
    config = load_config(data={**BASE, "STREAMS": [named, other]})
    metrics = JobMetrics(SimpleNamespace(config=config, counters=JobCounters(), progress_view=lambda p: p))
    metrics.source_records = {"bookings": 5, "rides": 2}
    labels = [labels for metric, labels, _ in metrics.values() if metric.name == "dagger_source_records_total"]
    assert labels == [{"table": "bookings", "stream": "main-cluster"}, {"table": "rides", "stream": "rides"}]


def test_every_accepted_key_is_exercised_by_a_test():
    """A key a config may set is named in some test (a config it loads, a keyword it passes) or listed as
    ignored; :data:`NOT_YET_EXERCISED` holds the keys still without one, and may only shrink."""
    import ast

    keys = {k for model in _models().values() for k in model.model_fields if k.isupper()}
    texts = []
    for path in (ROOT / "tests").rglob("*.py"):
        tree = ast.parse(path.read_text())
        if path.resolve() == Path(__file__).resolve():  # this file's list of untested keys sets none of them
            tree.body = [n for n in tree.body if not (isinstance(n, ast.Assign) and "NOT_YET" in ast.unparse(n))]
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
            elif isinstance(node, ast.keyword) and node.arg:
                texts.append(node.arg)
    data = [
        *(ROOT / "tests").rglob("*.properties"),
        *(ROOT / "tests").rglob("*.json"),
        *(ROOT / "configs").glob("*.json"),
    ]
    texts += [path.read_text() for path in data]
    named = "\n".join(texts)
    untested = {k for k in keys if k not in _ignored() and not re.search(rf"\b{k}\b", named)}
    assert not untested - NOT_YET_EXERCISED, f"keys no test sets: {sorted(untested - NOT_YET_EXERCISED)}"
    assert not NOT_YET_EXERCISED - untested, (
        f"tested now, drop them from NOT_YET_EXERCISED: {sorted(NOT_YET_EXERCISED - untested)}"
    )


#: keys the code uses that no test sets yet (each one a debt: a test that sets it removes it from here)
NOT_YET_EXERCISED = frozenset()


def test_a_key_one_sink_type_uses_is_named_as_ignored_on_a_sink_type_that_does_not():
    bigquery = {
        "SINK_TYPE": "bigquery",
        "SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID": "p",
        "SINK_BIGQUERY_DATASET_NAME": "d",
        "SINK_BIGQUERY_TABLE_NAME": "t",
        "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS": "dagger.examples.BookingSummaryMessage",
        "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS": "dagger.examples.BookingLogKey",
    }
    found = dict(ignored_keys_set(load_config(data={**BASE, **bigquery})))
    assert found == {
        "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS": SINKS.get("bigquery").settings.ignored_keys[
            "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS"
        ]
    }
    kafka = {
        "SINK_TYPE": "kafka",
        "SINK_KAFKA_BROKERS": "127.0.0.1:9092",
        "SINK_KAFKA_TOPIC": "out",
        "SINK_KAFKA_PROTO_MESSAGE": "dagger.examples.BookingSummaryMessage",
        "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS": "dagger.examples.BookingLogKey",
    }
    assert ignored_keys_set(load_config(data={**BASE, **kafka})) == []  # the Kafka sink keys its records with it
    assert (
        "| `SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS` (`SINK_TYPE=bigquery`) |"
        in (ROOT / "docs" / "config.md").read_text()
    )
