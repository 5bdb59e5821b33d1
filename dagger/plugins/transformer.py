"""The transformer contract and its registry: what a ``transformation_class`` stands for.

Dagger's transformers are Java classes built with ``(arguments, columnNames, DaggerContext)`` that turn one Flink
stream into another. Here a transformer is a class registered, the way every plugin is, under the name users write
in ``transformation_class`` with a typed model of its ``transformation_arguments``; Dagger's qualified class names
(``org.raystack.dagger.functions.transformers.HashTransformer``, the ``io.odpf`` and ``com.gotocompany`` packages
too) resolve to the same registration. It is built on the driver as ``Transformer(settings, env)``, with its validated
arguments and a :class:`~dagger.plugins.processor.ProcessorEnv` (the shared context, where its entry is, the columns
of its rows), and :meth:`Transformer.transform` returns a new (streaming or batch) DataFrame. A user transformer::

    from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer

    class UpperArguments(TransformerArguments):
        column: str

    class Upper(Transformer):
        \"\"\"Upper-cases ``column``.\"\"\"

        name = "UpperTransformer"

        def transform(self, df):
            from pyspark.sql import functions as F

            column = self.column(self.settings.column, "column")
            return df.withColumn(column, F.upper(column))

    register_transformer("UpperTransformer", UpperArguments, Upper)

Configs name it ``UpperTransformer`` once its module is imported (``PYTHON_FILES``), or once an installed
package's ``dagger.transformers`` entry point names the class (``UpperTransformer = "my_package.module:Upper"``,
which then needs no ``register_transformer`` call: its class attribute ``settings_model`` is the model), or
directly as ``my_package.module:Upper``.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from dagger.errors import DaggerConfigError
from dagger.plugins.registry import Plugin, Registry

if TYPE_CHECKING:
    from dagger.plugins.processor import ProcessorEnv

#: the Java packages of Dagger's transformers: a qualified name in one of them resolves to the short name
DAGGER_PACKAGES = (
    "org.raystack.dagger.functions.transformers.",
    "io.odpf.dagger.functions.transformers.",
    "com.gotocompany.dagger.functions.transformers.",
)


class TransformerArguments(BaseModel):
    """Base of a transformer's ``transformation_arguments`` model. Arguments it does not declare are kept (Dagger
    passes its transformers the whole map)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


_MISSING = object()


class Transformer(ABC):
    """A named DataFrame → DataFrame step configured by ``transformation_arguments``; built and run on the driver."""

    #: the name users write in ``transformation_class``, for messages (default: the class's name)
    name: ClassVar[str]
    #: where it may run: ``pre`` (per input table, before SQL) and/or ``post`` (on the output rows)
    stages: ClassVar[tuple[str, ...]] = ("pre", "post")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not getattr(cls, "name", ""):  # a class an entry point names may leave it out
            cls.name = cls.__name__

    #: the model of its ``transformation_arguments`` when the class is registered by an entry point or named as
    #: ``package.module:Class`` (a ``register_transformer`` call names its own)
    settings_model: ClassVar[type[TransformerArguments]] = TransformerArguments

    def __init__(self, settings: TransformerArguments, env: ProcessorEnv):
        #: the validated ``transformation_arguments``
        self.settings = settings
        self.arguments = settings.model_dump(by_alias=True)
        self.env = env
        self.columns = list(env.columns)
        self.context = context = env.context
        self.where = env.where
        if context.stage not in self.stages:
            raise DaggerConfigError(
                f"{self.where}: {self.name} runs only as a {' or '.join(self.stages)}-processor, not in "
                f"{'PROCESSOR_PREPROCESSOR_CONFIG' if context.stage == 'pre' else 'PROCESSOR_POSTPROCESSOR_CONFIG'}"
            )

    def argument(self, key: str, kind: type | tuple[type, ...] = str, default: Any = _MISSING) -> Any:
        """``transformation_arguments[key]`` checked against ``kind``; a clear error when missing or wrong."""
        if key not in self.arguments:
            if default is not _MISSING:
                return default
            raise DaggerConfigError(
                f"{self.where}: {self.name} needs transformation_arguments.{key}; given: "
                f"{', '.join(sorted(self.arguments)) or 'none'}"
            )
        value = self.arguments[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if int in kinds and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)  # Dagger configs often quote numbers
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise DaggerConfigError(
                f"{self.where}: {self.name} argument {key} must be {names}, got {type(value).__name__} {value!r}"
            )
        return value

    def column(self, name: str, key: str) -> str:
        """A column that must exist (the top-level name of a dotted path)."""
        if name.split(".")[0] not in self.columns:
            raise DaggerConfigError(
                f"{self.where}: {self.name} argument {key} names column {name!r}, which is not in the rows; "
                f"columns: {', '.join(self.columns)}"
            )
        return name

    @abstractmethod
    def transform(self, df: Any) -> Any:
        """Return the transformed DataFrame."""


#: the transformers by ``transformation_class``; each registration's constructor is the class
TRANSFORMERS: Registry[type[Transformer]] = Registry(
    kind="transformer", group="dagger.transformers", settings_base=TransformerArguments, contract=Transformer
)


def register_transformer(
    name: str, settings: type[TransformerArguments], build: type[Transformer], summary: str | None = None
) -> Plugin:
    """Register a transformer class under ``name`` (what users write in ``transformation_class``)."""
    return TRANSFORMERS.register(name, settings, build, summary)


def resolve_transformer(name: str, where: str) -> Plugin:
    """The registration of a ``transformation_class`` value (a short name, Dagger's qualified name, or
    ``package.module:Class``, which registers the class under that name the first time), or a config error listing
    what is accepted."""
    short = name
    for package in DAGGER_PACKAGES:
        short = short.removeprefix(package)
    plugins = TRANSFORMERS.plugins()
    if short in plugins:
        return plugins[short]
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            found: Any = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise DaggerConfigError(f"{where}: cannot import transformer {name!r}: {exc}") from None
        if not (isinstance(found, type) and issubclass(found, Transformer)):
            raise DaggerConfigError(f"{where}: {name!r} is not a dagger.plugins.transformer.Transformer")
        return register_transformer(name, found.settings_model, found)  # a registry entry as any other
    raise DaggerConfigError(
        f"{where}: unknown transformation_class {name!r}; accepted: {', '.join(sorted(plugins))} (also with "
        f"Dagger's package {DAGGER_PACKAGES[0].rstrip('.')}), or package.module:Class of your own"
    )
