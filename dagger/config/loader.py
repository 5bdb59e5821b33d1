"""Load a job config file, apply overrides and environment variables, and validate it.

Accepted files: a JSON object (``.json``) or Dagger's Java ``.properties`` format (``KEY=value`` lines).
``${ENV_VAR}`` (or ``${ENV_VAR:-default}``) anywhere in a string value is replaced from the environment,
so secrets stay out of config files. ``--set KEY=VALUE`` overrides a top-level key, or a stream key with
``STREAMS[0].KEY=VALUE``.

Every problem becomes one :class:`~dagger.errors.DaggerConfigError` whose message lists each bad key with
its value and what is accepted.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from dagger.config.model import JobConfig
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
                streams = json.loads(streams)
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


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    data: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> JobConfig:
    """Load, override, substitute and validate a job config.

    Parameters
    ----------
    path:
        A ``.json`` or ``.properties`` file. Ignored when ``data`` is given.
    overrides:
        ``KEY=VALUE`` strings, as given to ``dagger run --set``.
    data:
        A raw config dict (used by tests and by embedding applications).
    environ:
        Environment used for ``${VAR}`` substitution; defaults to ``os.environ``.

    Raises
    ------
    DaggerConfigError
        With one line per problem: key, value, and what is accepted.
    """
    raw = dict(data) if data is not None else read_config_file(path)  # type: ignore[arg-type]
    raw = apply_overrides(raw, overrides or [])
    raw = substitute_env(raw, environ)
    return validate_config(raw)


def validate_config(raw: dict[str, Any]) -> JobConfig:
    """Validate a raw config dict into a :class:`JobConfig` or raise one clear DaggerConfigError."""
    try:
        return JobConfig.model_validate(raw)
    except ValidationError as exc:
        lines = [_format_error(err, raw) for err in exc.errors(include_url=False)]
        # pydantic reports the same union failure once per branch; keep each message once
        unique = list(dict.fromkeys(lines))
        raise DaggerConfigError("invalid job config:\n  - " + "\n  - ".join(unique)) from None


def _location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before", "json-or-python", "list", "dict") or str(part).startswith(
            ("function-", "nullable")
        ):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _known_keys(model: type[BaseModel]) -> list[str]:
    keys = list(model.model_fields)
    if model is JobConfig:
        keys.append("SQL_QUERY")
    return keys


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel]:
    """The model class that owns the last key of ``loc`` (for unknown-key suggestions)."""
    model: type[BaseModel] = JobConfig
    for part in loc[:-1]:
        if isinstance(part, int) or part not in model.model_fields:
            continue
        annotation = model.model_fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        for cand in list(candidates):
            candidates.extend(getattr(cand, "__args__", ()))
        for cand in candidates:
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                model = cand
                break
    return model


def _format_error(err: dict[str, Any], raw: dict[str, Any]) -> str:
    loc = tuple(err.get("loc", ()))
    where = _location(loc)
    kind = err.get("type", "")
    value = err.get("input")
    if kind == "extra_forbidden":
        key = str(loc[-1])
        known = _known_keys(_model_at(loc))
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"{where}: unknown key{hint}"
    if kind == "missing":
        return f"{where}: is required"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{where}: {value!r} is not accepted; accepted: {expected}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{where}: {value!r} is not an integer"
    if kind in ("bool_parsing", "bool_type"):
        return f"{where}: {value!r} is not a boolean; accepted: true, false"
    if kind in ("string_type",):
        return f"{where}: expected a string, got {json.dumps(value)[:80]}"
    if kind in ("list_type",):
        return f"{where}: expected a JSON array, got {json.dumps(value)[:80]}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"{where}: expected a JSON object, got {json.dumps(value, default=str)[:80]}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{where}: {value!r} {err['msg'].lower()}"
    if kind == "value_error":
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        if message.startswith("is not valid JSON"):
            return f"{where}: {message}"
        return f"{where}: {message}" if where else message
    return f"{where}: {err.get('msg')} (got {json.dumps(value, default=str)[:80]})"
