"""The source registry: every ``SOURCE_NAME`` a stream can name, and the source that reads it.

A source is one module and one registration (:class:`dagger.sources.base.Source` is the contract)::

    register_source(MySource())

Sources outside this package register the same way, from code that runs before the config is loaded, or from an
installed package's ``dagger.sources`` entry point, which names the module to import; entry points and the
built-in sources are loaded the first time a ``SOURCE_NAME`` is looked up.
"""

from __future__ import annotations

from importlib import import_module, metadata
from typing import TYPE_CHECKING

from dagger.errors import DaggerConfigError

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.sources.base import Source

#: the entry-point group of sources installed as packages
ENTRY_POINT_GROUP = "dagger.sources"
#: the modules that register the built-in sources, imported the first time a source is looked up
BUILT_IN = ("dagger.sources",)

SOURCES: dict[str, Source] = {}
_loaded = False


def register_source(source: Source) -> Source:
    """Register ``source`` under each of its ``names``; returns it."""
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
