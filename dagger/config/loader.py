"""Load a job config file, apply overrides and environment variables, and validate it.

Accepted files: a JSON object (``.json``) or Dagger's Java ``.properties`` format (``KEY=value`` lines).
``${ENV_VAR}`` (or ``${ENV_VAR:-default}``) anywhere in a string value is replaced from the environment,
so secrets stay out of config files. ``--set KEY=VALUE`` overrides a top-level key, or a stream key with
``STREAMS[0].KEY=VALUE``.

Every problem becomes one :class:`~dagger.errors.DaggerConfigError` whose message lists each bad key with
its value and what is accepted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dagger.config.arguments import ConfigArguments, environment_config
from dagger.config.errors import format_validation_error
from dagger.config.model import JobConfig, lenient_json
from dagger.errors import DaggerConfigError

_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_STREAM_KEY = re.compile(r"^STREAMS\[(\d+)\]\.(\w+)$")


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``.json`` or ``.properties`` job file into a raw dict (no validation yet)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DaggerConfigError(f"config file {str(p)!r} does not exist") from None
    except OSError as exc:
        raise DaggerConfigError(f"config file {str(p)!r} cannot be read: {exc.strerror}") from None
    if p.suffix == ".properties":
        return _parse_properties(text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DaggerConfigError(
            f"config file {str(p)!r} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise DaggerConfigError(
            f"config file {str(p)!r} must hold a JSON object of KEY: value pairs, got {type(data).__name__}"
        )
    return data


def _parse_properties(text: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            key, sep, value = stripped.partition(":")
        data[key.strip()] = value.strip()
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` (or ``STREAMS[i].KEY=VALUE``) overrides to a raw config dict."""
    data = dict(data)
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise DaggerConfigError(f"--set {item!r} must look like KEY=VALUE (or STREAMS[0].KEY=VALUE)")
        match = _STREAM_KEY.match(key)
        if match:
            index, stream_key = int(match.group(1)), match.group(2)
            streams = data.get("STREAMS")
            if isinstance(streams, str):
                streams = lenient_json(streams, "STREAMS")
            if not isinstance(streams, list) or index >= len(streams):
                raise DaggerConfigError(f"--set {key}: the config has no stream number {index}")
            streams = [dict(s) for s in streams]
            streams[index][stream_key] = value
            data["STREAMS"] = streams
        else:
            data[key] = value
    return data


def substitute_env(value: Any, environ: dict[str, str] | None = None, where: str = "") -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of a raw config value."""
    env = os.environ if environ is None else environ
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise DaggerConfigError(
                f"{where or 'config'}: environment variable {name} is not set "
                f"(referenced as ${{{name}}}; set it or write ${{{name}:-default}})"
            )

        return _ENV_PATTERN.sub(repl, value)
    if isinstance(value, dict):
        return {k: substitute_env(v, env, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, env, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def read_config(
    path: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    data: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    arguments: ConfigArguments | None = None,
    plugin_keys: Iterable[str] = (),
) -> JobConfig:
    """Load, merge, override, substitute and validate a job config's shape (its plugins' keys are bound by
    :func:`dagger.job.binding.bind`; :func:`dagger.job.load_config` does both).

    Layers, each overriding the one before: the file (or ``data``), the environment (when ``arguments`` ask for
    ``ConfigSource=ENVIRONMENT``), ``--KEY value`` arguments (``--encodedArgs`` included), then ``overrides``.

    Parameters
    ----------
    path:
        A ``.json`` or ``.properties`` file. Ignored when ``data`` is given.
    overrides:
        ``KEY=VALUE`` strings, as given to ``dagger run --set``.
    data:
        A raw config dict (used by tests and by embedding applications).
    environ:
        Environment used for ``${VAR}`` substitution and ``ConfigSource=ENVIRONMENT``; defaults to ``os.environ``.
    arguments:
        Dagger's config arguments (:func:`dagger.config.arguments.parse_arguments`).
    plugin_keys:
        The registered plugins' keys, picked from the environment with the job's (``ConfigSource=ENVIRONMENT``).

    Raises
    ------
    DaggerConfigError
        With one line per problem: key, value, and what is accepted.
    """
    environ = os.environ if environ is None else environ
    path = path or (arguments.file if arguments else None)
    if data is not None:
        raw = dict(data)
    elif path is not None:
        raw = read_config_file(path)
    elif arguments is not None and (arguments.pairs or arguments.from_environment):
        raw = {}
    else:
        raise DaggerConfigError(
            "no job config: give a file (dagger run job.json), --KEY value arguments, --encodedArgs <base64>, "
            "or ConfigSource=ENVIRONMENT with the keys in the environment"
        )
    if arguments is not None:
        if arguments.from_environment:
            raw = merge_layer(raw, environment_config(environ, plugin_keys))
        raw = merge_layer(raw, arguments.pairs)
    raw = apply_overrides(raw, overrides or [])
    tests = raw.pop("TESTS", None)  # each test case substitutes its own ENVIRONMENT (dagger test)
    raw = substitute_env(raw, environ)
    if tests is not None:
        raw["TESTS"] = tests
    return parse_config(raw)


#: keys that name the same setting: a layer setting one replaces the other from the layers below
_ALIASES = (("FLINK_SQL_QUERY", "SQL_QUERY"),)


def merge_layer(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``layer``'s keys replacing its own (whole values; aliases replace each other)."""
    out = dict(base)
    for names in _ALIASES:
        if any(name in layer for name in names):
            for name in names:
                out.pop(name, None)
    out.update(layer)
    return out


def parse_config(raw: dict[str, Any]) -> JobConfig:
    """Validate a raw config dict's shape into a :class:`JobConfig` or raise one clear DaggerConfigError."""
    try:
        return JobConfig.model_validate(raw)
    except ValidationError as exc:
        unique = format_validation_error(exc, JobConfig)
        raise DaggerConfigError("invalid job config:\n  - " + "\n  - ".join(unique)) from None
