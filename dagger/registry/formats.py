"""The input data type registry: every ``INPUT_DATATYPE`` a stream can name, with its settings model.

An input data type says how a stream's records are encoded and where its table's columns and rowtime come from:
``PROTO`` (a message of the descriptor sets, ``INPUT_SCHEMA_PROTO_CLASS``) or ``JSON`` (a JSON Schema,
``INPUT_SCHEMA_JSON_SCHEMA``). Its settings model holds its ``INPUT_SCHEMA_*`` keys; a stream's keys are validated
against the model of its ``INPUT_DATATYPE`` as they are against its source's (:mod:`dagger.registry.sources`).
The built-in types register in :mod:`dagger.serde.formats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from pydantic import BaseModel, ConfigDict

#: the modules that register the built-in input data types, imported the first time one is looked up
BUILT_IN = ("dagger.serde.formats",)


class InputFormatSettings(BaseModel):
    """Base of an input data type's settings model: its ``INPUT_SCHEMA_*`` keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


@dataclass(frozen=True)
class InputFormat:
    """A registered input data type: the name users write in ``INPUT_DATATYPE`` and its settings model."""

    name: str
    settings: type[InputFormatSettings]
    #: one line for the config reference
    summary: str = ""


FORMATS: dict[str, InputFormat] = {}


def register_format(name: str, settings: type[InputFormatSettings], summary: str | None = None) -> InputFormat:
    """Register an input data type under ``name`` (upper case, what users write in ``INPUT_DATATYPE``)."""
    if not (isinstance(settings, type) and issubclass(settings, InputFormatSettings)):
        raise TypeError(f"input data type {name!r}: settings must be an InputFormatSettings subclass")
    bad = sorted(k for k in settings.model_fields if not k.startswith("INPUT_SCHEMA_") or k == "INPUT_SCHEMA_TABLE")
    if bad:
        raise ValueError(f"input data type {name!r}: settings keys must start with INPUT_SCHEMA_; got {', '.join(bad)}")
    doc = (settings.__doc__ or "").strip().splitlines()
    FORMATS[name] = InputFormat(name, settings, summary if summary is not None else (doc[0] if doc else ""))
    return FORMATS[name]


def format_plugins() -> dict[str, InputFormat]:
    """Every registered input data type."""
    for module in BUILT_IN:
        import_module(module)
    return FORMATS


def format_keys() -> dict[str, list[str]]:
    """Key -> the input data types whose settings have it."""
    owners: dict[str, list[str]] = {}
    for name, plugin in format_plugins().items():
        for key in plugin.settings.model_fields:
            owners.setdefault(key, []).append(name)
    return owners
