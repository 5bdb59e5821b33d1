"""The sink registry: every ``SINK_TYPE`` a job can name, with its settings model and its constructor.

A sink is one module and one registration::

    class WebhookSettings(SinkSettings):
        SINK_WEBHOOK_URL: str = Field(description="Where rows are POSTed.")

    class WebhookSink(Sink):
        name = "webhook"
        ...

    register_sink("webhook", WebhookSettings, WebhookSink.from_settings)

The settings model holds the sink's own ``SINK_<TYPE>_*`` keys (typed, with defaults and a description each:
the config reference is generated from it). A job's sink entry is validated against the model of its
``SINK_TYPE``: a key no sink knows is an error naming the closest one, a key of another sink is accepted and
ignored (as Dagger does when a job switches ``SINK_TYPE``). The constructor receives the validated settings and
the job's descriptors and returns a :class:`~dagger.sinks.base.Sink`.

Sinks outside this package register the same way, from code that runs before the config is loaded (an
embedding application), or from an installed package's ``dagger.sinks`` entry point, which names the module to
import (``[project.entry-points."dagger.sinks"] webhook = "my_package.webhook"``); entry points are loaded the
first time a ``SINK_TYPE`` is looked up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module, metadata
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from dagger.errors import DaggerConfigError

if TYPE_CHECKING:
    from dagger.schema.registry import DescriptorSet
    from dagger.sinks.base import Sink

#: the entry-point group of sinks installed as packages
ENTRY_POINT_GROUP = "dagger.sinks"
#: the modules that register the built-in sinks, imported the first time a sink is looked up
BUILT_IN = ("dagger.sinks",)
#: keys every sink entry has, whatever its type (:class:`dagger.config.model.SinkConfig`)
COMMON_KEYS = frozenset({"SINK_TYPE", "SINK_NAME", "SINK_ERROR_TYPES_FOR_FAILURE"})
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


class SinkSettings(BaseModel):
    """Base of a sink's settings model: its ``SINK_*`` keys, typed, each with a default and a description."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @property
    def large_messages(self) -> bool:
        """Whether this sink is set up for records of megabytes (the session then keeps Spark's byte cap on the
        Arrow batches sent to Python workers; see :mod:`dagger.session_tuning`)."""
        return False

    def require(self, sink: str, *keys: str) -> None:
        """Raise the config error for the first of ``keys`` left empty (required by SINK_TYPE ``sink``)."""
        for key in keys:
            if getattr(self, key) in (None, ""):
                raise ValueError(f"{key} is required when SINK_TYPE is '{sink}'")


@dataclass(frozen=True)
class SinkPlugin:
    """A registered sink: the name users write in ``SINK_TYPE``, its settings model and its constructor."""

    name: str
    settings: type[SinkSettings]
    build: Callable[[Any, DescriptorSet], Sink]
    #: one line for the config reference
    summary: str = ""


SINKS: dict[str, SinkPlugin] = {}
_entry_points_loaded = False


def register_sink(
    name: str,
    settings: type[SinkSettings],
    build: Callable[[Any, DescriptorSet], Sink],
    summary: str | None = None,
) -> SinkPlugin:
    """Register a sink under ``name`` (what users write in ``SINK_TYPE``); returns the registration.

    ``settings`` is the sink's :class:`SinkSettings` model (keys named ``SINK_*``); ``build(settings,
    descriptors)`` returns the :class:`~dagger.sinks.base.Sink`. Registering a name again replaces it.
    """
    if not _NAME.match(name):
        raise ValueError(f"sink name {name!r} must be lower case letters, digits, '-' or '_'")
    if not (isinstance(settings, type) and issubclass(settings, SinkSettings)):
        raise TypeError(f"sink {name!r}: settings must be a SinkSettings subclass, got {settings!r}")
    bad = sorted(k for k in settings.model_fields if not k.startswith("SINK_") or k in COMMON_KEYS or k == "SINKS")
    if bad:
        raise ValueError(
            f"sink {name!r}: settings keys must start with SINK_ and must not be {', '.join(sorted(COMMON_KEYS))}; "
            f"got {', '.join(bad)}"
        )
    doc = (settings.__doc__ or "").strip().splitlines()
    plugin = SinkPlugin(name, settings, build, summary if summary is not None else (doc[0] if doc else ""))
    SINKS[name] = plugin
    return plugin


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in SINKS:
            continue
        try:
            import_module(entry.value.split(":")[0])
        except Exception as exc:  # noqa: BLE001 - one broken package must not hide the other sinks
            raise DaggerConfigError(
                f"sink {entry.name!r} (entry point {entry.value!r} of {entry.dist.name if entry.dist else '?'}) "
                f"cannot be imported: {type(exc).__name__}: {exc}"
            ) from exc
        if entry.name not in SINKS:
            raise DaggerConfigError(
                f"sink {entry.name!r}: module {entry.value!r} was imported but did not call register_sink({entry.name!r}, ...)"
            )


def sink_plugins() -> dict[str, SinkPlugin]:
    """Every registered sink (built-in, registered in code, and installed packages' entry points)."""
    for module in BUILT_IN:
        import_module(module)
    _load_entry_points()
    return SINKS


def sink_keys() -> dict[str, list[str]]:
    """Key → the sinks whose settings have it."""
    owners: dict[str, list[str]] = {}
    for plugin in sink_plugins().values():
        for key in plugin.settings.model_fields:
            owners.setdefault(key, []).append(plugin.name)
    return owners
