"""Keys a Dagger config may hold that this runner accepts and does nothing with, each with the reason.

Every key of every settings model is either used by the code or listed: here when it is the job's (Flink's runtime,
Python UDFs), or by the plugin whose settings accept it, in its settings model's ``ignored_keys`` (a sink's, a
source's; ``tests/unit/config/test_silent_keys.py`` walks them all). ``dagger validate`` and the start of a run name each listed key a config sets, with its reason, so a
migrating user never relies on a key in silence; ``docs/config.md`` shows the table.
"""

from __future__ import annotations

from typing import Any

#: key -> why it does nothing here (and what to use instead, where something does the job)
IGNORED_KEYS: dict[str, str] = {
    # Flink's runtime: Spark has its own form, or none is needed
    "FLINK_WATERMARK_INTERVAL_MS": "Spark moves the watermark once per micro-batch; `SPARK_TRIGGER_INTERVAL_MS` "
    "sets how often that is",
    "FLINK_PARALLELISM_MAX": "Flink's key-group count for rescaling; Spark's state is partitioned by "
    "`spark.sql.shuffle.partitions`, fixed when the checkpoint is created",
    "FLINK_CHECKPOINT_TIMEOUT_MS": "a micro-batch's commit has no separate timeout; each sink bounds its own calls",
    "FLINK_CHECKPOINT_MIN_PAUSE_MS": "micro-batches follow one another with no pause; `SPARK_TRIGGER_INTERVAL_MS` "
    "spaces them",
    "FLINK_CHECKPOINT_MAX_CONCURRENT": "Spark runs one micro-batch (one checkpoint) at a time",
    "FLINK_RETENTION_MIN_IDLE_STATE_HOUR": "documented by Dagger, read by neither its code nor this runner (see "
    "FLINK_RETENTION_IDLE_STATE_MINUTE)",
    "FLINK_RETENTION_MAX_IDLE_STATE_HOUR": "documented by Dagger, read by neither its code nor this runner (see "
    "FLINK_RETENTION_IDLE_STATE_MINUTE)",
    "SCHEMA_REGISTRY_STENCIL_REFRESH_STRATEGY": "descriptor sets are re-fetched after the TTL "
    "(`SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS`) whatever the strategy",
    # Python UDFs (PYTHON_UDF_CONFIG)
    "PYTHON_FN_EXECUTION_BUNDLE_SIZE": "Spark hands Python UDFs whole Arrow batches (PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE "
    "sets their size); there is no separate bundle to flush",
    "PYTHON_FN_EXECUTION_BUNDLE_TIME": "Spark hands Python UDFs whole Arrow batches within a micro-batch; there is no "
    "bundle timer (`SPARK_TRIGGER_INTERVAL_MS` paces the micro-batches)",
    "UDF_DART_GCS_PROJECT_ID": "the GCS client finds the bucket's project itself (credentials from the environment)",
}


def ignored_keys_set(config: Any) -> list[tuple[str, str]]:
    """``(where, reason)`` for every listed key a job config sets: top-level keys, stream keys
    (``STREAMS[i].KEY``) and sink keys (``SINKS[i].KEY``, or the top-level sink's)."""
    found = [(key, IGNORED_KEYS[key]) for key in sorted(config.model_fields_set) if key in IGNORED_KEYS]
    for i, stream in enumerate(config.STREAMS):
        found += [(f"STREAMS[{i}].{k}", IGNORED_KEYS[k]) for k in stream.keys_set if k in IGNORED_KEYS]
        scoped = stream.settings.ignored_keys  # keys of its source's own it does nothing with
        found += [(f"STREAMS[{i}].{k}", scoped[k]) for k in stream.keys_set if k in scoped]
    udf = getattr(config, "PYTHON_UDF_CONFIG", None)
    if udf is not None:
        found += [
            (f"PYTHON_UDF_CONFIG.{k}", IGNORED_KEYS[k]) for k in sorted(udf.model_fields_set) if k in IGNORED_KEYS
        ]
    entries = config.SINKS if config.SINKS is not None else [config.single_sink]
    for i, sink in enumerate(entries):
        where = f"SINKS[{i}]." if config.SINKS is not None else ""
        found += [(f"{where}{k}", IGNORED_KEYS[k]) for k in sink.keys_set if k in IGNORED_KEYS]
        scoped = sink.settings.ignored_keys  # keys of its own, or of another sink type, it does nothing with
        found += [(f"{where}{k}", scoped[k]) for k in sink.keys_set if k in scoped]
    return found


def markdown_table(sink_settings: dict[str, Any], source_settings: dict[str, Any]) -> str:
    """The table ``docs/config.md`` shows; ``sink_settings`` and ``source_settings``: each ``SINK_TYPE``'s and
    ``SOURCE_NAME``'s settings model, whose ``ignored_keys`` are listed for it."""
    rows = ["| Key | Why it does nothing here |", "|---|---|"]
    rows += [f"| `{key}` | {reason} |" for key, reason in sorted(IGNORED_KEYS.items())]
    for what, models in (("SINK_TYPE", sink_settings), ("SOURCE_NAME", source_settings)):
        rows += [
            f"| `{key}` (`{what}={name}`) | {reason} |"
            for name, model in sorted(models.items())
            for key, reason in sorted(model.ignored_keys.items())
        ]
    return "\n".join(rows)
