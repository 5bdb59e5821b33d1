"""What Dagger's sinks share: the fan-out writer Spark runs each micro-batch through
(:mod:`~dagger.sinks.spark_writer`), rows a destination refuses (:mod:`~dagger.sinks.rejected`), ``dagger test``'s
capture and read-back (:mod:`~dagger.sinks.capture`, :mod:`~dagger.sinks.readback`), and the log sink; the
built-in sinks are registered by name in :mod:`dagger.catalog`. Each connector's sink lives in its own package
(:mod:`dagger.kafka.sink`, :mod:`dagger.influx.sink`, :mod:`dagger.bigquery.sink`). This ``__init__`` imports nothing, so that a sink importing what sinks share never
loads the others.
"""
