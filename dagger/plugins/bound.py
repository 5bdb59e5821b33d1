"""A job's entries bound to their plugins: a ``STREAMS`` entry holding its source's typed settings and its
format's (:class:`BoundStream`), a sink entry holding its sink's (:class:`BoundSink`). :mod:`dagger.job.binding`
makes them from the config's entries once their keys validate, and puts them in the config's place; the config
layer below knows no plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import Field

from dagger.config.model import SinkConfig, StreamConfig
from dagger.plugins.format import Format, InputFormatSettings, format_named
from dagger.plugins.sink import SinkSettings
from dagger.plugins.source import Source, SourceSettings, source_named

if TYPE_CHECKING:
    from pydantic import BaseModel

E = TypeVar("E", bound="BaseModel")


class BoundStream(StreamConfig):
    """A stream bound to its plugins: its keys, and its source's and format's typed settings."""

    #: its ``SOURCE_<NAME>_*`` keys, validated by its source's settings model
    settings: SourceSettings = Field(exclude=True)
    #: its ``INPUT_SCHEMA_*`` keys, validated by its format's settings model
    format: InputFormatSettings = Field(exclude=True)

    @classmethod
    def of(cls, stream: StreamConfig, settings: SourceSettings, format_settings: InputFormatSettings) -> BoundStream:
        return _bound(cls, stream, settings=settings, format=format_settings)

    @property
    def source(self) -> Source:
        """The registered source of its ``SOURCE_NAME``."""
        return source_named(self.source_name)

    @property
    def records(self) -> Format:
        """The registered format of its ``INPUT_DATATYPE``."""
        return format_named(self.INPUT_DATATYPE)


class BoundSink(SinkConfig):
    """A sink entry bound to its plugin: its keys, and its sink's typed settings."""

    #: its own keys, validated by its ``SINK_TYPE``'s settings model
    settings: SinkSettings = Field(exclude=True)

    @classmethod
    def of(cls, sink: SinkConfig, settings: SinkSettings) -> BoundSink:
        return _bound(cls, sink, settings=settings)


def _bound(cls: type[E], entry: Any, **plugins: Any) -> E:
    """``entry`` as ``cls`` (no validation again: its keys were), holding ``plugins``; the keys it sets stay its
    own (``keys_set``)."""
    values = {name: getattr(entry, name) for name in type(entry).model_fields if name not in plugins}
    return cls.model_construct(
        _fields_set=set(entry.model_fields_set), **values, **(entry.model_extra or {}), **plugins
    )
