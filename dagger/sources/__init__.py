"""The built-in sources, registered by name (:mod:`~dagger.sources.catalog`), and the Parquet source; the Kafka
source is :mod:`dagger.kafka.source`. This ``__init__`` imports nothing, so that a source importing a shared module
never loads the others.
"""
