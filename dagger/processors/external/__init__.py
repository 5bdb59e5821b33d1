"""External sources of post-processors (``external_source``): lookups registered by the key users write (Dagger's
``http``, ``es``, ``pg`` and ``grpc`` in :mod:`.kinds`; others through :mod:`dagger.plugins.lookup`).

:func:`enrich` appends one hidden column per ``output_mapping`` entry (``__ext_<source>_<column>``) to the SQL
output, computed on the executors with ``mapInArrow``; the post-processor's output-row model then selects them
under their output names, before the internal sources (Dagger's order: http, es, pg, grpc, internal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.plugins.lookup import LOOKUPS, PREFIX
from dagger.plugins.processor import ProcessorEnv

if TYPE_CHECKING:
    from dagger.config.model import PostProcessorConfig
    from dagger.plugins.processor import ProcessorContext

__all__ = ["PREFIX", "enrich"]


def enrich(df: Any, post: PostProcessorConfig, context: ProcessorContext) -> tuple[Any, list[tuple[str, str]]]:
    """``df`` with every lookup's output columns; returns it and ``[(output name, hidden column)]``."""

    outputs: list[tuple[str, str]] = []
    for kind, index, settings in post.lookups:
        where = f"PROCESSOR_POSTPROCESSOR_CONFIG.external_source.{kind}[{index}]"
        lookup = LOOKUPS.plugins()[kind].build(settings, ProcessorEnv(context, where, tuple(df.columns), index, kind))
        df, added = lookup.plan(df)
        outputs.extend(added)
    names = [name for name, _ in outputs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DaggerConfigError(f"PROCESSOR_POSTPROCESSOR_CONFIG.external_source: output_mapping repeats {repeated}")
    return df, outputs
