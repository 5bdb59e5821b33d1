"""The job's functions and the context its processors get: the function library, ``FUNCTION_FACTORY_CLASSES``
and ``PYTHON_UDF_CONFIG`` files, registered once with the session. Runs on the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagger.functions import build_catalog, udf_context
from dagger.functions import register as register_catalog
from dagger.job.descriptors import current
from dagger.plugins.processor import ProcessorContext
from dagger.python_udfs import load_python_udfs

if TYPE_CHECKING:
    from dagger.functions import FunctionCatalog
    from dagger.job.context import JobContext


def catalog(ctx: JobContext) -> FunctionCatalog:
    """The job's functions: the library, ``FUNCTION_FACTORY_CLASSES`` and ``PYTHON_UDF_CONFIG`` files."""

    if ctx.catalog is None:
        ctx.catalog = build_catalog(ctx.config, load_python_udfs(ctx.config, ctx.spark))
    return ctx.catalog


def register(ctx: JobContext, texts: list[str] | None = None) -> FunctionCatalog:
    """Register the function library, factory modules and Python UDF files once; returns the catalog.

    With ``texts`` (everything the job runs: its rewritten SQL and its settings), only the functions they can
    reach are registered (:meth:`~dagger.functions.FunctionCatalog.needed`).
    """

    functions = catalog(ctx)
    counters = ctx.counters
    if counters.udf_context is None:
        counters.udf_context = udf_context(ctx.spark, ctx.config, current(ctx))
        only = functions.needed(texts) if texts is not None else None
        counters.functions_used = sorted(functions.needed([ctx.config.sql]))
        register_catalog(ctx.spark, functions, counters.udf_context, sql_functions=False, only=only)  # SQL inlines
    return functions


def processor_context(ctx: JobContext, stage: str, table: str = "NULL") -> ProcessorContext:
    """What a pre-processor (``stage`` ``pre``, on ``table``) or a post-processor (``post``) gets."""

    return ProcessorContext(
        spark=ctx.spark,
        config=ctx.config,
        descriptors=current(ctx),
        macros=register(ctx).macros,
        stage=stage,
        table_name=table,
        bounded=ctx.bounded,
        observations=ctx.counters.processor_observations,
        lookups=ctx.counters.lookups,
        session_settings=ctx.processor_settings,
        mocks=ctx.fixtures.mocks if ctx.fixtures is not None else None,
    )
