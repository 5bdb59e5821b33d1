"""One way to register a plugin, whatever its kind: a name, a typed settings model, a constructor.

Every kind of plugin (source, sink, input data type, transformer, lookup, UDF) has one :class:`Registry`, kept
beside its contract in :mod:`dagger.plugins` (:mod:`~dagger.plugins.source`, :mod:`~dagger.plugins.sink`, ...).
A plugin registers itself with the registry's ``register(name, settings, build)`` when its module is imported::

    register_sink("webhook", WebhookSettings, WebhookSink.from_settings)

Packages installed beside Dagger plug in through the registry's entry-point group (``dagger.sinks``,
``dagger.sources``, ...), read the first time the registry is. An entry point names the plugin's class, which then
needs no ``register`` call: the entry point's name is the name users write, the class's ``settings_model``
attribute its settings model::

    [project.entry-points."dagger.sinks"]
    webhook = "my_package.webhook:WebhookSink"

or it names a module that registers its plugins when imported (``webhook = "my_package.webhook"``).

The built-in plugins register the same way from their own packages, which :mod:`dagger.job.binding` (the one
place a job config meets its plugins) imports; this module imports no plugin.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import import_module, metadata
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from dagger.errors import DaggerConfigError

B = TypeVar("B", bound=Callable[..., Any])


@dataclass(frozen=True)
class Plugin(Generic[B]):
    """A registered plugin: the name users write, its settings model, its constructor and one line for the
    config reference."""

    kind: str
    name: str
    settings: type[BaseModel]
    build: B
    summary: str = ""


@dataclass
class Registry(Generic[B]):
    """The plugins of one kind, by name.

    Parameters
    ----------
    kind:
        What the plugins are, for messages (``sink``, ``source``, ...).
    group:
        The entry-point group installed packages register under.
    settings_base:
        The class every settings model of the kind derives from.
    key_prefixes:
        What every settings key must start with (``SINK_``); empty: no rule.
    reserved:
        Keys no settings model may declare (the keys every config entry of the kind has).
    name_pattern:
        A rule names must follow (sinks are lower case), or None.
    """

    kind: str
    group: str
    settings_base: type[BaseModel]
    key_prefixes: tuple[str, ...] = ()
    reserved: frozenset[str] = frozenset()
    name_pattern: str | None = None
    #: the rule ``name_pattern`` stands for, in words
    name_rule: str = ""
    #: what an entry point may name instead of a module: a subclass (or an instance) of this class
    contract: type | None = None
    #: how what an entry point names becomes the kind's constructor (None: the class itself is); a TypeError
    #: says it cannot
    build_of: Callable[[Any], B] | None = None
    entries: dict[str, Plugin[B]] = field(default_factory=dict)
    _entry_points_loaded: bool = False

    def register(self, name: str, settings: type[BaseModel], build: B, summary: str | None = None) -> Plugin[B]:
        """Register ``build`` under ``name`` with its ``settings`` model; registering a name again replaces it."""
        if self.name_pattern and not re.fullmatch(self.name_pattern, name):
            raise ValueError(f"{self.kind} name {name!r} must be {self.name_rule or 'like ' + self.name_pattern}")
        if not (isinstance(settings, type) and issubclass(settings, self.settings_base)):
            raise TypeError(
                f"{self.kind} {name!r}: settings must be a {self.settings_base.__name__} subclass, got {settings!r}"
            )
        bad = sorted(
            k
            for k in settings.model_fields
            if (self.key_prefixes and not k.startswith(self.key_prefixes)) or k in self.reserved
        )
        if bad:
            rule = f"must start with {' or '.join(self.key_prefixes)}" if self.key_prefixes else "are not allowed"
            clash = any(k in self.reserved for k in bad)
            reserved = f" and must not be {', '.join(sorted(self.reserved))}" if clash else ""
            raise ValueError(f"{self.kind} {name!r}: settings keys {rule}{reserved}; got {', '.join(bad)}")
        doc = (settings.__doc__ or "").strip().splitlines()
        plugin = Plugin(self.kind, name, settings, build, summary if summary is not None else (doc[0] if doc else ""))
        self.entries[name] = plugin
        return plugin

    def plugins(self) -> dict[str, Plugin[B]]:
        """Every registered plugin of the kind: registered in code, and installed packages' entry points."""
        self._load_entry_points()
        return self.entries

    def get(self, name: str) -> Plugin[B] | None:
        """The plugin registered under ``name``, or None."""
        return self.plugins().get(name)

    def keys(self) -> dict[str, list[str]]:
        """Settings key → the names of the plugins whose settings have it."""
        owners: dict[str, list[str]] = {}
        for name, plugin in self.plugins().items():
            for key in plugin.settings.model_fields:
                owners.setdefault(key, []).append(name)
        return owners

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for entry in _entry_points(self.group):
            if entry.name in self.entries:
                continue
            module_name, _, attribute = entry.value.partition(":")
            try:
                found = import_module(module_name.strip())
                for part in attribute.strip().split(".") if attribute.strip() else ():
                    found = getattr(found, part)
            except Exception as exc:  # noqa: BLE001 - one broken package must not hide the other plugins
                raise DaggerConfigError(
                    f"{self.kind} {entry.name!r} (entry point {entry.value!r} of "
                    f"{entry.dist.name if entry.dist else '?'}) cannot be imported: {type(exc).__name__}: {exc}"
                ) from exc
            if entry.name not in self.entries and attribute:
                self._register_found(entry.name, entry.value, found)
            if entry.name not in self.entries:
                raise DaggerConfigError(
                    f"{self.kind} {entry.name!r}: module {entry.value!r} was imported but registered no "
                    f"{self.kind} named {entry.name!r}"
                )

    def _register_found(self, name: str, value: str, found: Any) -> None:
        """Register the class (or the object) an entry point names, by the entry point's name."""
        contract = self.contract
        if contract is not None and not (
            isinstance(found, contract) or (isinstance(found, type) and issubclass(found, contract))
        ):
            raise DaggerConfigError(
                f"{self.kind} {name!r}: entry point {value!r} names {found!r}, not a "
                f"{contract.__module__}.{contract.__name__}"
            )
        try:
            build = self.build_of(found) if self.build_of else found
        except TypeError as exc:
            raise DaggerConfigError(f"{self.kind} {name!r}: entry point {value!r}: {exc}") from None
        settings = getattr(found, "settings_model", None) or self.settings_base
        doc = getattr(found, "doc", None) if isinstance(getattr(found, "doc", None), str) else found.__doc__
        summary = (doc or "").strip().splitlines()[0] if (doc or "").strip() else None
        self.register(name, settings, build, summary)


def _entry_points(group: str) -> Iterable[metadata.EntryPoint]:
    return metadata.entry_points(group=group)
