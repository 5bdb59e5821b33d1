"""The source registry: every ``SOURCE_NAME`` a stream can name, the source that reads it and its settings model.

A source is one module and one registration (:class:`dagger.sources.base.Source` is the contract)::

    class WebhookSourceSettings(SourceSettings):
        SOURCE_WEBHOOK_URL: str = Field(description="Where records are polled from.")

    class WebhookSource(Source):
        names = ("WEBHOOK_SOURCE",)
        source_type = "UNBOUNDED"
        settings = WebhookSourceSettings
        ...

    register_source(WebhookSource())

The settings model holds the source's own ``SOURCE_<NAME>_*`` keys (typed, with defaults and a description each:
the config reference is generated from it). ``STREAMS`` entries stay flat, as in Dagger: a stream's keys are
validated against the model of its ``SOURCE_NAME`` (and of its ``INPUT_DATATYPE``, :mod:`dagger.registry.formats`);
a key no source knows is an error naming the closest one, a key of another source is accepted and ignored.

Sources outside this package register the same way, from code that runs before the config is loaded, or from an
installed package's ``dagger.sources`` entry point, which names the module to import; entry points and the
built-in sources are loaded the first time a ``SOURCE_NAME`` is looked up.
"""

from __future__ import annotations

from importlib import import_module, metadata
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from dagger.errors import DaggerConfigError

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.sources.base import Source

#: the entry-point group of sources installed as packages
ENTRY_POINT_GROUP = "dagger.sources"
#: the modules that register the built-in sources, imported the first time a source is looked up
BUILT_IN = ("dagger.sources",)

#: keys every stream has, whatever its source and input data type (:class:`dagger.config.model.StreamConfig`)
COMMON_KEYS = frozenset({"INPUT_SCHEMA_TABLE", "INPUT_DATATYPE", "SOURCE_DETAILS"})


class SourceSettings(BaseModel):
    """Base of a source's settings model: its ``SOURCE_*`` keys, typed, each with a default and a description."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def require(self, what: str, *keys: str) -> None:
        """Raise the config error for the first of ``keys`` left empty (``what``: the stream, for the message)."""
        for key in keys:
            if getattr(self, key) in (None, "", []):
                raise ValueError(f"{key} is required for {what}")


SOURCES: dict[str, Source] = {}
_loaded = False


def register_source(source: Source) -> Source:
    """Register ``source`` under each of its ``names``; returns it. Its ``settings`` must be a
    :class:`SourceSettings` model whose keys start with ``SOURCE_``."""
    settings = getattr(source, "settings", None)
    if not (isinstance(settings, type) and issubclass(settings, SourceSettings)):
        raise TypeError(f"source {source.names!r}: settings must be a SourceSettings subclass, got {settings!r}")
    bad = sorted(k for k in settings.model_fields if not k.startswith("SOURCE_") or k in COMMON_KEYS)
    if bad:
        raise ValueError(f"source {source.names!r}: settings keys must start with SOURCE_; got {', '.join(bad)}")
    for name in source.names:
        SOURCES[name] = source
    return source


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILT_IN:
        import_module(module)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            import_module(entry.value.split(":")[0])
        except Exception as exc:  # noqa: BLE001 - one broken package must not hide the other sources
            raise DaggerConfigError(
                f"source {entry.name!r} (entry point {entry.value!r}) cannot be imported: {type(exc).__name__}: {exc}"
            ) from exc


def source_plugins() -> dict[str, Source]:
    """Every registered source by ``SOURCE_NAME`` (built-in, registered in code, installed packages')."""
    _load()
    return SOURCES


def source_of(stream: StreamConfig) -> Source:
    """The registered source of a stream (its ``SOURCE_NAME``)."""
    return source_plugins()[stream.source_name]


def source_names() -> list[tuple[str, str]]:
    """Every accepted ``(SOURCE_NAME, SOURCE_TYPE)`` pair."""
    return sorted((name, source.source_type) for name, source in source_plugins().items())


def source_keys() -> dict[str, list[str]]:
    """Key -> the ``SOURCE_NAME`` values whose settings have it."""
    owners: dict[str, list[str]] = {}
    for name, source in source_plugins().items():
        for key in source.settings.model_fields:
            owners.setdefault(key, []).append(name)
    return owners
