"""The lookup contract and its registry: what a key of a post-processor's ``external_source`` stands for.

A lookup enriches the SQL output's rows with answers from a service, one call per row (Dagger's external
sources: ``http``, ``es``, ``pg``, ``grpc``). It is one class, registered the way every plugin is::

    class RedisSettings(LookupSettings):
        host: str = Field(description="Redis host.")
        key_pattern: str
        output_mapping: dict[str, OutputPath]

    class RedisLookup(Lookup):
        settings_model = RedisSettings

        def plan(self, df):
            column = self.hidden_column("answer")  # one hidden column per output, computed on the executors
            return df.withColumn(column, ...), [("answer", column)]

    register_lookup("redis", RedisSettings, RedisLookup)

(or, from an installed package, an entry point ``redis = "my_package.redis:RedisLookup"`` in the
``dagger.lookups`` group, with no ``register_lookup`` call: :mod:`dagger.plugins.registry`).

Each ``external_source.<name>`` entry of a job's ``PROCESSOR_POSTPROCESSOR_CONFIG`` is validated by the settings
model registered under ``<name>`` (:mod:`dagger.job.binding`). The lookup is built on the driver when the job is
planned, as ``Lookup(settings, env)``: its validated settings and a :class:`~dagger.plugins.processor.ProcessorEnv`
(the post-processors' shared context, the entry's index and where it is, for messages); :meth:`Lookup.plan` then
adds its outputs to the rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from dagger.plugins.registry import Plugin, Registry

if TYPE_CHECKING:
    from dagger.plugins.processor import ProcessorEnv

#: the order Dagger runs its external sources in; lookups registered beyond these run after them, by name
DAGGER_ORDER = ("http", "es", "pg", "grpc")
#: what a lookup's hidden columns start with: the output row's ``*`` leaves them out
PREFIX = "__ext_"


class OutputPath(BaseModel):
    """Where an output column's value is in a lookup's answer."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="JSONPath into the response.")


class LookupSettings(BaseModel):
    """Base of a lookup's settings model: the keys every external source has (Dagger's and ours)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    stream_timeout: int = Field(description="Async timeout in ms.")
    capacity: int = Field(description="Requests in flight.")
    fail_on_errors: bool = Field(False, description="Fail the batch on an error instead of passing the row on.")
    type: str | None = Field(None, description="Output proto used to type the response.")
    retain_response_type: bool = Field(
        False,
        description="With no `type`: keep each response value's own type instead of converting it to the Kafka "
        "sink message's field: a gRPC output is typed by the response message, an output named as a sink message "
        "field by that field, any other is a VARIANT column (numbers reach sinks as DOUBLE).",
    )
    metricId: str | None = Field(None, description="Metric id of this source.")  # noqa: N815 - Dagger's key
    cache_ttl_seconds: int = Field(0, description="Beyond Dagger: cache answers per executor for this long (0: off).")
    retries: int = Field(0, description="Beyond Dagger: retries of a timed-out, unreachable or 5xx call.")
    retry_backoff_ms: int = Field(100, description="Beyond Dagger: first retry delay, doubled each retry.")
    rate_limit_per_second: float = Field(0, description="Beyond Dagger: calls per second per task (0: no limit).")


class Lookup(ABC):
    """One ``external_source`` entry: built on the driver from its settings and env, it plans its calls."""

    #: the model of its settings when an entry point registers the class
    settings_model: ClassVar[type[LookupSettings]] = LookupSettings

    def __init__(self, settings: Any, env: ProcessorEnv):
        #: the validated entry
        self.settings = settings
        self.env = env
        self.context = env.context
        self.index = env.index
        self.where = env.where

    def hidden_column(self, output: str) -> str:
        """The hidden column an output is computed in (:data:`PREFIX`, the lookup's name and index, the output)."""
        return f"{PREFIX}{self.env.name}{self.index}_{output}"

    @abstractmethod
    def plan(self, df: Any) -> tuple[Any, list[tuple[str, str]]]:
        """``df`` with one hidden column per output, computed on the executors, and ``[(output name, hidden
        column)]``."""


#: the lookups by ``external_source`` key; each registration's constructor is the class
LOOKUPS: Registry[type[Lookup]] = Registry(
    kind="lookup", group="dagger.lookups", settings_base=LookupSettings, contract=Lookup
)


def register_lookup(
    name: str, settings: type[LookupSettings], build: type[Lookup], summary: str | None = None
) -> Plugin:
    """Register a lookup under ``name`` (the ``external_source`` key users write)."""
    return LOOKUPS.register(name, settings, build, summary)


def lookup_order() -> list[str]:
    """The registered lookups in the order a post-processor runs them: Dagger's four, then the others by name."""
    names = list(LOOKUPS.plugins())
    return [n for n in DAGGER_ORDER if n in names] + sorted(n for n in names if n not in DAGGER_ORDER)
