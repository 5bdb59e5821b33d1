"""The function registry: SQL functions a package adds to every job, registered the way every plugin is.

A function is declared with its typed signature, documentation and implementation by the decorators of
:mod:`udfs.declare` (``sql_function``, ``macro``, ``arrow_function``, ``table_function``) or ``@udfs.udf``. The
built-in library registers here as any package does (:func:`dagger.functions.registered_functions`); a job's own
inputs, its ``FUNCTION_FACTORY_CLASSES`` modules and its ``PYTHON_UDF_CONFIG`` files, are resolved in one place
beside them (:func:`dagger.functions.build_catalog`). A package that adds functions to every job registers them
here::

    from dagger.plugins.udf import FunctionSettings, register_udf, register_module

    register_udf("Triple", FunctionSettings, lambda: triple_declaration)  # one function
    register_module(my_package.functions)  # every function a module declares

or, with no registering code at all, names the declared function in its ``dagger.functions`` entry point
(``Triple = "my_package.functions:triple"``; the entry point's name is the function's SQL name), or a module that
registers its functions when imported (the entry point's name is one of them). A function takes no config keys: its settings model is :class:`FunctionSettings`, empty; its
constructor returns the declaration (a :class:`udfs.declare.Function`). A package's function replaces the
library's of the same name (with a warning); ``FUNCTION_FACTORY_CLASSES`` and Python files replace both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from dagger.plugins.registry import Plugin, Registry
from udfs.declare import Function, functions_of


class FunctionSettings(BaseModel):
    """A function's settings: none (its typed signature is part of its declaration)."""

    model_config = ConfigDict(extra="forbid")


#: the functions registered by name (what SQL calls them)
UDFS: Registry[Callable[[], Any]] = Registry(
    kind="function",
    group="dagger.functions",
    settings_base=FunctionSettings,
    build_of=lambda found: _declared(found),
)


def _declared(found: Any) -> Callable[[], Function]:
    """The constructor of what a ``dagger.functions`` entry point names: a declared function (``module:triple``,
    a function under one of the :mod:`udfs.declare` decorators, or the declaration itself)."""
    declared = [found] if isinstance(found, Function) else list(getattr(found, "__dagger_functions__", []))
    if len(declared) != 1:
        raise TypeError(f"{found!r} is not one function declared with udfs.declare's decorators or @udfs.udf")
    return lambda: declared[0]


def register_udf(
    name: str, settings: type[FunctionSettings], build: Callable[[], Any], summary: str | None = None
) -> Plugin:
    """Register a function under ``name``; ``build()`` returns its declaration."""
    return UDFS.register(name, settings, build, summary)


def register_module(module: Any) -> list[Plugin]:
    """Register every function ``module`` declares (with the :mod:`udfs.declare` decorators or ``@udfs.udf``)."""

    return [
        register_udf(f.name, FunctionSettings, lambda f=f: f, f.doc.splitlines()[0] if f.doc else "")
        for f in functions_of(module)
    ]
