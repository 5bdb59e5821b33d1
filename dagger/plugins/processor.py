"""What every processor (a transformer or a lookup) is built with: the :class:`ProcessorContext` the job's pre- or
post-processors share, and the :class:`ProcessorEnv` one of them gets: that context, where its entry is in the
config (for messages), its index among the entries of its kind and the columns of the rows it receives.

A processor is built on the driver when the job is planned, as ``Processor(settings, env)`` (its validated
settings model and its env), and returns a new DataFrame; nothing here runs on the executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.model import JobConfig
    from dagger.schema.descriptor_sets import DescriptorSet


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
    #: same session, by the job when the query starts); a user's own SPARK_CONF value wins
    session_settings: dict[str, str] = field(default_factory=dict)
    #: ``dagger test``: the case's answers to the lookups (:mod:`dagger.processors.external.mocks`), which then
    #: call nothing; None in every run of a job
    mocks: list[dict[str, Any]] | None = None

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
        from dagger.sql.rewrite import rewrite_sql  # start-up: loads sqlglot

        for view, frame in views.items():
            frame.createOrReplaceTempView(view)
        return self.spark.sql(rewrite_sql(query, self.macros))


@dataclass(frozen=True)
class ProcessorEnv:
    """What one processor is given beside its settings: the shared context and its own place in the config."""

    context: ProcessorContext
    #: where its entry is in the config (``PROCESSOR_POSTPROCESSOR_CONFIG.transformers[0]``), for messages
    where: str
    #: the columns of the rows it receives
    columns: tuple[str, ...] = ()
    #: its index among the config's entries of its kind (a lookup's metrics and hidden columns are named by it)
    index: int = 0
    #: the name it is registered under (a lookup's ``external_source`` key)
    name: str = ""
