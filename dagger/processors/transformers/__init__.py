"""Transformers, registered by the name users write in ``transformation_class``.

Short names (``HashTransformer``) and Dagger's qualified class names
(``org.raystack.dagger.functions.transformers.HashTransformer``, also the ``io.odpf`` and ``com.gotocompany``
packages) resolve to the same class; ``package.module:Class`` imports a user's transformer. See
:mod:`dagger.processors.transformers.base` for the contract.
"""

from __future__ import annotations

import importlib
from typing import Any

from dagger.errors import DaggerConfigError
from dagger.processors.transformers.base import ProcessorContext, Transformer

__all__ = ["TRANSFORMERS", "ProcessorContext", "Transformer", "register_transformer", "resolve_transformer"]

#: transformation_class → class
TRANSFORMERS: dict[str, type[Transformer]] = {}

DAGGER_PACKAGES = (
    "org.raystack.dagger.functions.transformers.",
    "io.odpf.dagger.functions.transformers.",
    "com.gotocompany.dagger.functions.transformers.",
)
_BUILTIN_MODULES = ("invalid_record_filter", "deduplication", "hash", "clear_column", "feature", "sql")


def register_transformer(cls: type[Transformer]) -> type[Transformer]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    TRANSFORMERS[cls.name] = cls
    return cls


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{module}")


def resolve_transformer(name: str, where: str) -> type[Transformer]:
    """The class for a ``transformation_class`` value, or a config error listing what is accepted."""
    _load_builtins()
    short = name
    for package in DAGGER_PACKAGES:
        short = short.removeprefix(package)
    if short in TRANSFORMERS:
        return TRANSFORMERS[short]
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            found: Any = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise DaggerConfigError(f"{where}: cannot import transformer {name!r}: {exc}") from None
        if not (isinstance(found, type) and issubclass(found, Transformer)):
            raise DaggerConfigError(f"{where}: {name!r} is not a dagger.processors.transformers.Transformer")
        return found
    raise DaggerConfigError(
        f"{where}: unknown transformation_class {name!r}; accepted: {', '.join(sorted(TRANSFORMERS))} (also with "
        f"Dagger's package {DAGGER_PACKAGES[0].rstrip('.')}), or package.module:Class of your own"
    )
