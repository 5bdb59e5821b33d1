"""The lookup contract and its registry: what a key of a post-processor's ``external_source`` stands for.

A lookup enriches the SQL output's rows with answers from a service, one call per row (Dagger's external
sources: ``http``, ``es``, ``pg``, ``grpc``). It registers the way every plugin does::

    class RedisSettings(LookupSettings):
        host: str = Field(description="Redis host.")
        key_pattern: str
        output_mapping: dict[str, OutputPath]

    def redis_lookup(df, settings, index, context, where):
        ...  # plan it: add one hidden column per output, computed on the executors
        return df, [(output_name, hidden_column), ...]

    register_lookup("redis", RedisSettings, redis_lookup)

Each ``external_source.<name>`` entry of a job's ``PROCESSOR_POSTPROCESSOR_CONFIG`` is validated by the settings
model registered under ``<name>`` (:mod:`dagger.job.binding`); the planner runs on the driver when the job is
planned, with the validated settings, the entry's index, the :class:`~dagger.plugins.transformer.
ProcessorContext` and where the entry is (for messages). Installed packages register through the
``dagger.lookups`` entry-point group (:mod:`dagger.plugins.registry`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagger.plugins.registry import Plugin, Registry

#: the order Dagger runs its external sources in; lookups registered beyond these run after them, by name
DAGGER_ORDER = ("http", "es", "pg", "grpc")


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


#: ``(df, settings, index, context, where) -> (df, [(output name, hidden column)])``
LookupPlanner = Callable[..., tuple[Any, list[tuple[str, str]]]]

#: the lookups by ``external_source`` key
LOOKUPS: Registry[LookupPlanner] = Registry(kind="lookup", group="dagger.lookups", settings_base=LookupSettings)


def register_lookup(
    name: str, settings: type[LookupSettings], build: LookupPlanner, summary: str | None = None
) -> Plugin:
    """Register a lookup under ``name`` (the ``external_source`` key users write)."""
    return LOOKUPS.register(name, settings, build, summary)


def lookup_order() -> list[str]:
    """The registered lookups in the order a post-processor runs them: Dagger's four, then the others by name."""
    names = list(LOOKUPS.plugins())
    return [n for n in DAGGER_ORDER if n in names] + sorted(n for n in names if n not in DAGGER_ORDER)
