"""Dagger's transformers, registered by the name users write in ``transformation_class`` (the contract and the
registry: :mod:`dagger.plugins.transformer`)."""

from dagger.processors.transformers import (  # noqa: F401 - each module registers its transformers
    clear_column,
    deduplication,
    feature,
    hash,
    invalid_record_filter,
    sql,
)
