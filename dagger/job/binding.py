"""The one place a job config meets its plugins: every stream bound to its source and input data type, every sink
to its ``SINK_TYPE``, every ``external_source`` entry to its lookup, each entry's plugin keys validated by the settings model registered with them.

The config model (:mod:`dagger.config.model`) checks a job's shape and knows no plugin; :func:`bind` (called by
:func:`dagger.job.load_config`) looks each entry's plugins up in their registries, validates the keys, attaches
the validated settings (``stream.settings``, ``stream.format``, ``sink.settings``, a post-processor's
``lookups``) and runs the checks that need a
plugin (a source's own rules, a dead-letter policy without a destination). Every problem of the config is
reported at once, one line each, worded as the config model words its own.

This module imports the built-in sources, sinks and input data types, so that they are registered before any
lookup, and Dagger's lookups when a job has one (their callers load asyncio); it runs on the driver.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from pydantic import BaseModel, ValidationError

import dagger.catalog  # noqa: F401 - registers the built-in sources and sinks
import dagger.formats  # noqa: F401 - registers the built-in input data types
import dagger.processors.external.kinds  # noqa: F401 - registers the built-in lookups
from dagger.config.arguments import ConfigArguments
from dagger.config.errors import format_validation_error, placed
from dagger.config.loader import parse_config, read_config
from dagger.config.model import JobConfig, PostProcessorConfig, SinkConfig, StreamConfig
from dagger.errors import DaggerConfigError
from dagger.plugins.bound import BoundSink, BoundStream
from dagger.plugins.format import FORMATS
from dagger.plugins.lookup import LOOKUPS, lookup_order
from dagger.plugins.sink import SINKS
from dagger.plugins.source import SOURCES, source_names, source_of


def bind(config: JobConfig) -> JobConfig:
    """Bind ``config``'s streams and sinks to their plugins: each entry becomes a
    :class:`~dagger.plugins.bound.BoundStream` or :class:`~dagger.plugins.bound.BoundSink` holding its plugins'
    typed settings, in the config's place (the config is returned); raise one :class:`DaggerConfigError` naming
    every problem."""
    problems: list[str] = []
    for i, stream in enumerate(config.STREAMS):
        bound, found = _bind_stream(stream)
        problems += placed(f"STREAMS[{i}]", found)
        config.STREAMS[i] = bound or stream
    for i, sink in enumerate(config.SINKS or []):
        bound, found = _bind_sink(sink)
        problems += placed(f"SINKS[{i}]", found)
        config.SINKS[i] = bound or sink
    if not config.SINKS:
        bound, found = _bind_sink(config.single_sink)
        problems += found
        config.single_sink = bound or config.single_sink
    if config.PROCESSOR_POSTPROCESSOR_CONFIG is not None:
        problems += _bind_lookups(config.PROCESSOR_POSTPROCESSOR_CONFIG)
    if not problems:
        problems += _dead_letter_problems(config)
    if problems:
        raise DaggerConfigError("invalid job config:\n  - " + "\n  - ".join(dict.fromkeys(problems)))
    return config


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    data: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    arguments: ConfigArguments | None = None,
) -> JobConfig:
    """Read a job config (:func:`dagger.config.loader.read_config`: file or ``data``, environment, arguments,
    overrides, ``${VAR}``) and bind it to its plugins; one :class:`DaggerConfigError` names every problem."""
    return bind(read_config(path, overrides, data, environ, arguments, plugin_keys=SINKS.keys()))


def validate_config(raw: dict[str, Any]) -> JobConfig:
    """A raw config dict validated and bound to its plugins (or one clear :class:`DaggerConfigError`)."""
    return bind(parse_config(raw))


def _bind_stream(stream: StreamConfig) -> tuple[BoundStream | None, list[str]]:
    table = stream.INPUT_SCHEMA_TABLE
    detail = stream.SOURCE_DETAILS[0]
    pair = (detail.SOURCE_NAME, detail.SOURCE_TYPE)
    accepted = source_names()
    if pair not in accepted:
        return None, [
            f"SOURCE_DETAILS of stream '{table}' combines SOURCE_NAME={pair[0]} with SOURCE_TYPE={pair[1]}, which no "
            f"source supports; accepted: {', '.join(f'{n}+{t}' for n, t in accepted)}"
        ]
    formats = FORMATS.plugins()
    if stream.INPUT_DATATYPE not in formats:
        return None, [
            f"INPUT_DATATYPE of stream '{table}': {stream.INPUT_DATATYPE!r} is not accepted; accepted: "
            + ", ".join(sorted(formats))
        ]
    problems = _unknown_keys(stream, {**SOURCES.keys(), **FORMATS.keys()})
    settings = _own(stream, SOURCES.plugins()[detail.SOURCE_NAME].settings, problems)
    format_settings = _own(stream, formats[stream.INPUT_DATATYPE].settings, problems)
    if problems:
        return None, problems
    bound = BoundStream.of(stream, settings, format_settings)
    source = bound.source
    if source.formats is not None and stream.INPUT_DATATYPE not in source.formats:
        return None, [
            f"INPUT_DATATYPE {stream.INPUT_DATATYPE} of stream '{table}' is not one {detail.SOURCE_NAME} reads: it "
            f"{source.formats_rule or 'reads ' + ', '.join(source.formats)}"
        ]
    try:
        source.check(bound)
    except ValueError as exc:
        return None, str(exc).split("\n  - ")
    return bound, []


def bind_sink(sink: SinkConfig) -> SinkConfig:
    """One sink entry bound to its ``SINK_TYPE`` (an embedding application's or a test's own entry); one
    :class:`DaggerConfigError` names every problem."""
    bound, problems = _bind_sink(sink)
    if problems:
        raise DaggerConfigError("invalid sink:\n  - " + "\n  - ".join(problems))
    return bound


def _bind_sink(sink: SinkConfig) -> tuple[BoundSink | None, list[str]]:
    plugins = SINKS.plugins()
    plugin = plugins.get(sink.SINK_TYPE)
    if plugin is None:
        return None, [f"SINK_TYPE: {sink.SINK_TYPE!r} is not accepted; accepted: {', '.join(sorted(plugins))}"]
    problems = _unknown_keys(sink, SINKS.keys())
    settings = _own(sink, plugin.settings, problems)
    return (None if problems else BoundSink.of(sink, settings)), problems


def _bind_lookups(post: PostProcessorConfig) -> list[str]:
    if not post.external_source:
        return []

    plugins = LOOKUPS.plugins()
    order = lookup_order()
    problems: list[str] = []
    bound: list[tuple[str, int, Any]] = []
    for kind in sorted(post.external_source, key=lambda k: order.index(k) if k in order else len(order)):
        where = f"PROCESSOR_POSTPROCESSOR_CONFIG.external_source.{kind}"
        if kind not in plugins:
            close = difflib.get_close_matches(kind, list(plugins), n=1, cutoff=0.6)
            problems.append(
                f"{where}: unknown lookup"
                + (f"; did you mean {close[0]}?" if close else "")
                + f"; accepted: {', '.join(order)}"
            )
            continue
        model = plugins[kind].settings
        for index, entry in enumerate(post.external_source[kind]):
            try:
                bound.append((kind, index, model.model_validate(entry)))
            except ValidationError as exc:
                at = f"{where}[{index}]"  # a problem of a key hangs it on the entry; one of the entry follows it
                problems += [
                    f"{at}{m}" if m.startswith(":") else f"{at}.{m}" for m in format_validation_error(exc, model)
                ]
    if not problems:
        post.bind(bound)
    return problems


def _dead_letter_problems(config: JobConfig) -> list[str]:
    for stream in config.STREAMS:
        source = source_of(stream)
        if (
            source.invalid_record_policy(stream) == "dead-letter"
            and not source.dead_letter_topic(stream)
            and not config.has_dead_letter
        ):
            return [
                f"stream '{stream.INPUT_SCHEMA_TABLE}' has SOURCE_KAFKA_INVALID_RECORD_POLICY 'dead-letter' but no "
                "destination: set DEAD_LETTER_KAFKA_TOPIC (+ _BROKERS) or DEAD_LETTER_PATH, or the stream's "
                "SOURCE_KAFKA_DEAD_LETTER_TOPIC"
            ]
    return []


def _unknown_keys(entry: BaseModel, known: dict[str, list[str]]) -> list[str]:
    """A problem line for each key of ``entry`` no plugin knows, with the closest known key."""
    names = [*known, *type(entry).model_fields]
    problems = []
    for key in entry.model_extra or {}:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
            problems.append(f"{key}: unknown key" + (f"; did you mean {close[0]}?" if close else ""))
    return problems


def _own(entry: BaseModel, model: type[BaseModel], problems: list[str]) -> Any:
    """``entry``'s keys of ``model``, validated by it (None, with its problems added, when they do not hold)."""
    own = {k: v for k, v in (entry.model_extra or {}).items() if k in model.model_fields}
    try:
        return model.model_validate(own)
    except ValidationError as exc:
        problems.extend(format_validation_error(exc, model))
        return None
