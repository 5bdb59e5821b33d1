"""The built-in sources, registered by name (:mod:`~dagger.sources.catalog`). Each source lives in its connector's
package (:mod:`dagger.kafka.source`, :mod:`dagger.parquet.source`); this ``__init__`` imports nothing.
"""
