"""Dagger's ways of passing a job config besides a file: program arguments and the environment.

Raystack Dagger reads its flat key → value map from one of three places, and deployers rely on each:

* ``--KEY value`` program arguments (``--FLINK_JOB_ID bookings --SINK_TYPE log``);
* ``--encodedArgs <base64>``: the base64 of a JSON array of such tokens (``["--KEY","value",…]``), which is how
  GoTo's Entropy submits jobs (one opaque argument survives every layer of quoting);
* ``ConfigSource=ENVIRONMENT``: every known key read from the process environment (a Kubernetes ``env`` or
  ``envFrom``), and ``ConfigFile=<path>`` for a ``.properties`` file.

Here they combine, each overriding the one before: **file < environment < arguments < ``--set``**. The
environment is read only when asked (``ConfigSource=ENVIRONMENT`` as an argument or as an environment variable),
so a stray variable never changes a job; only known keys are read from it (the job keys, ``SQL_QUERY`` and every
registered sink's keys). Values are strings, as in a ``.properties`` file: structured keys (``STREAMS``, the
processor configs) hold JSON text.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dagger.errors import DaggerConfigError

#: how Dagger spells the environment switch (a JVM system property there; an argument or variable here)
CONFIG_SOURCE = "ConfigSource"
CONFIG_FILE = "ConfigFile"
ENCODED_ARGS = "--encodedArgs"
SOURCES = ("ENVIRONMENT", "ARGS", "FILE")
_KEY = re.compile(r"^--([A-Z][A-Z0-9_]*)$")


@dataclass
class ConfigArguments:
    """What a command line says about the config, gathered from every form."""

    file: str | None = None
    #: ``--KEY value`` pairs, in order (``--encodedArgs`` expanded in place)
    pairs: dict[str, str] = field(default_factory=dict)
    #: ``ConfigSource=ENVIRONMENT`` was given (as an argument or in the environment)
    from_environment: bool = False


def decode_encoded_args(value: str) -> list[str]:
    """The tokens of ``--encodedArgs``: base64 (standard or URL-safe, padding optional) of a JSON array of strings."""
    text = value.strip()
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_" if ("-" in text or "_" in text) else None)
        tokens = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError) as exc:
        raise DaggerConfigError(
            f"--encodedArgs: not the base64 of a JSON array ({type(exc).__name__}: {exc}); accepted: base64 of "
            '["--KEY","value",...], e.g. `echo -n \'["--SINK_TYPE","log"]\' | base64 -w0`'
        ) from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise DaggerConfigError(
            f"--encodedArgs: decodes to {type(tokens).__name__} {json.dumps(tokens)[:80]}; accepted: a JSON array of "
            'strings such as ["--KEY","value",...]'
        )
    return tokens


def parse_arguments(tokens: list[str], environ: Mapping[str, str] | None = None) -> ConfigArguments:
    """Read Dagger's config tokens: ``--KEY value``, ``--encodedArgs B64``, ``ConfigSource=…``, ``ConfigFile=…``.

    Raises DaggerConfigError naming a token that is none of these, or a key without a value.
    """
    out = ConfigArguments()
    source = (environ or {}).get(CONFIG_SOURCE)
    queue = list(tokens)
    while queue:
        token = queue.pop(0)
        if token == ENCODED_ARGS or token.startswith(ENCODED_ARGS + "="):
            value = token.split("=", 1)[1] if "=" in token else _value(queue, ENCODED_ARGS)
            queue[:0] = decode_encoded_args(value)
        elif token.startswith(CONFIG_SOURCE + "="):
            source = token.split("=", 1)[1]
        elif token.startswith(CONFIG_FILE + "="):
            out.file = token.split("=", 1)[1]
        elif match := _KEY.match(token.split("=", 1)[0]):
            key = match.group(1)
            out.pairs[key] = token.split("=", 1)[1] if "=" in token else _value(queue, token)
        else:
            raise DaggerConfigError(
                f"argument {token!r} is not a config argument; accepted: --KEY value (a config key in capitals, "
                f"e.g. --FLINK_JOB_ID bookings), {ENCODED_ARGS} <base64 of a JSON array of those>, "
                f"{CONFIG_SOURCE}=ENVIRONMENT, {CONFIG_FILE}=<path>, and the options in --help"
            )
    if source is not None:
        if source.upper() not in SOURCES:
            raise DaggerConfigError(f"{CONFIG_SOURCE}={source}: accepted: {', '.join(SOURCES)}")
        out.from_environment = source.upper() == "ENVIRONMENT"
    return out


def split_config_tokens(argv: list[str]) -> tuple[list[str], list[str]]:
    """Separate Dagger's config tokens (``--KEY value``, ``--encodedArgs B64``, ``ConfigSource=…``,
    ``ConfigFile=…``) from the other command-line arguments; returns ``(others, config_tokens)``.

    Config keys are in capitals and the CLI's own options in lower case, so the two never clash.
    """
    others: list[str] = []
    tokens: list[str] = []
    queue = list(argv)
    while queue:
        token = queue.pop(0)
        name = token.split("=", 1)[0]
        if name == ENCODED_ARGS or _KEY.match(name):
            tokens.append(token)
            if "=" not in token and queue:
                tokens.append(queue.pop(0))
        elif name in (CONFIG_SOURCE, CONFIG_FILE):
            tokens.append(token)
        else:
            others.append(token)
    return others, tokens


def _value(queue: list[str], key: str) -> str:
    if not queue:
        raise DaggerConfigError(f"{key} has no value; write {key} <value>")
    return queue.pop(0)


def environment_config(environ: Mapping[str, str], plugin_keys: Iterable[str] = ()) -> dict[str, str]:
    """Every known config key set in ``environ`` (job keys, ``SQL_QUERY``, and ``plugin_keys``: the registered
    plugins' keys)."""
    from dagger.config.model import JobConfig, SinkConfig  # cycle: dagger.config.model import(s) this module

    known = {*JobConfig.model_fields, "SQL_QUERY", *SinkConfig.model_fields, *plugin_keys} - {"single_sink"}
    return {key: value for key, value in environ.items() if key in known}
