"""The Parquet source (``PARQUET_SOURCE``): history in ``dt=/hr=`` files read by Spark's Parquet reader
(:mod:`~dagger.parquet.source`), in the time order and range of their path partitions
(:mod:`~dagger.parquet.time_partitions`)."""
