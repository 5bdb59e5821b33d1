"""The input data type registry: every ``INPUT_DATATYPE`` a stream can name, with its settings model.

An input data type says how a stream's records are encoded and where its table's columns and rowtime come from:
``PROTO`` (a message of the descriptor sets, ``INPUT_SCHEMA_PROTO_CLASS``), ``JSON`` (a JSON Schema,
``INPUT_SCHEMA_JSON_SCHEMA``) or ``AVRO`` (``INPUT_SCHEMA_AVRO_SCHEMA``), each plain or in Confluent's wire format
with a registry subject (``INPUT_SCHEMA_WIRE_FORMAT``). Its settings model holds its ``INPUT_SCHEMA_*`` keys; a stream's keys are validated
against the model of its ``INPUT_DATATYPE`` as they are against its source's (:mod:`dagger.plugins.source`).
The built-in types register in :mod:`dagger.serde.formats`; installed packages through the ``dagger.formats``
entry-point group (:mod:`dagger.plugins.registry`). The constructor of an input data type is its settings model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from dagger.plugins.registry import Plugin, Registry


class InputFormatSettings(BaseModel):
    """Base of an input data type's settings model: its ``INPUT_SCHEMA_*`` keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


#: the input data types by ``INPUT_DATATYPE``
FORMATS: Registry[type[InputFormatSettings]] = Registry(
    kind="input data type",
    group="dagger.formats",
    settings_base=InputFormatSettings,
    key_prefixes=("INPUT_SCHEMA_",),
    reserved=frozenset({"INPUT_SCHEMA_TABLE"}),
)


def register_format(name: str, settings: type[InputFormatSettings], summary: str | None = None) -> Plugin:
    """Register an input data type under ``name`` (upper case, what users write in ``INPUT_DATATYPE``)."""
    return FORMATS.register(name, settings, settings, summary)
