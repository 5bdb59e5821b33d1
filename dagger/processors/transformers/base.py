"""The transformer contract: a named, configured step from one DataFrame to the next.

Dagger's transformers are Java classes built with ``(arguments, columnNames, DaggerContext)`` that turn one
Flink stream into another. Here a transformer is a class registered under the name users write in
``transformation_class`` (Dagger's qualified class names resolve to the same class), built with its
``transformation_arguments``, the current column names and a :class:`ProcessorContext`, whose
:meth:`Transformer.transform` returns a new (streaming or batch) DataFrame.

A user transformer::

    from dagger.processors.transformers import Transformer, register_transformer

    @register_transformer
    class Upper(Transformer):
        \"\"\"Upper-cases ``column``.\"\"\"

        name = "UpperTransformer"

        def transform(self, df):
            from pyspark.sql import functions as F

            column = self.argument("column", str)
            return df.withColumn(column, F.upper(column))

Configs name it ``UpperTransformer`` once its module is imported (``PYTHON_FILES`` or an installed package), or
directly as ``my_package.module:Upper``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from dagger.errors import DaggerConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.model import JobConfig
    from dagger.schema.registry import DescriptorSet

_MISSING = object()


@dataclass
class ProcessorContext:
    """What a processor may use: the session, the job, the descriptors, and where it runs."""

    spark: SparkSession
    config: JobConfig
    descriptors: DescriptorSet
    macros: dict[str, Any]
    stage: str  # "pre" or "post"
    table_name: str  # the pre-processed table, or "NULL" in post-processors (as Dagger)
    bounded: bool = False
    observations: dict[str, Any] = field(default_factory=dict)  # bounded runs: name → Observation
    lookups: dict[str, Any] = field(default_factory=dict)  # external source label → its Metrics
    #: Spark session settings a processor needs for the job's query (applied, and unset for the next job in the
    #: same session, by the stream manager when the query starts); a user's own SPARK_CONF value wins
    session_settings: dict[str, str] = field(default_factory=dict)

    def observe(self, df: Any, name: str, *metrics: Any) -> Any:
        """``df.observe`` that reports in the query progress (streaming) or the run summary (bounded)."""
        if self.bounded:
            from pyspark.sql import Observation

            observation = Observation(name)
            self.observations[name] = observation
            return df.observe(observation, *metrics)
        return df.observe(name, *metrics)

    def sql(self, query: str, views: dict[str, Any]) -> Any:
        """Run ``query`` (Dagger's window syntax and every function available) over ``views``."""
        from dagger.sql.rewrite import rewrite_sql

        for view, frame in views.items():
            frame.createOrReplaceTempView(view)
        return self.spark.sql(rewrite_sql(query, self.macros))


class Transformer(ABC):
    """A named DataFrame → DataFrame step configured by ``transformation_arguments``."""

    #: the name users write in ``transformation_class``
    name: ClassVar[str]
    #: where it may run: ``pre`` (per input table, before SQL) and/or ``post`` (on the output rows)
    stages: ClassVar[tuple[str, ...]] = ("pre", "post")

    def __init__(self, arguments: dict[str, Any], columns: list[str], context: ProcessorContext, where: str):
        self.arguments = dict(arguments)
        self.columns = list(columns)
        self.context = context
        self.where = where
        if context.stage not in self.stages:
            raise DaggerConfigError(
                f"{where}: {self.name} runs only as a {' or '.join(self.stages)}-processor, not in "
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
