"""Everything Kafka, in one package.

* :mod:`~dagger.kafka.source`: the Kafka source (``SOURCE_NAME`` ``KAFKA_SOURCE``/``KAFKA_CONSUMER``): Dagger's
  own reader, a Python data source reading librdkafka's batches into Arrow, with its positions, group commits and
  event-time alignment; or Spark's own Kafka source with the JVM decoders (:mod:`~dagger.kafka.source.spark`).
* :mod:`~dagger.kafka.sink`: the Kafka sink (``SINK_TYPE`` ``kafka``): its records (value and key parts), their
  Schema Registry use, reading back what it wrote for ``dagger test``; or Spark's own Kafka sink with the JVM
  encoders (:mod:`~dagger.kafka.sink.spark`).
* :mod:`~dagger.kafka.spark_connector`: which jobs Spark's Kafka source and sink can run, in real-time mode and in
  micro-batches (``SPARK_KAFKA_CONNECTOR``), and the task slots they hold.
* :mod:`~dagger.kafka.client`: every Kafka client's settings, by role (``client_config``: Dagger's consumer and
  producer, Spark's, the dead letters'); :mod:`~dagger.kafka.java_client` translates librdkafka's names into the
  Java client's, and :mod:`~dagger.kafka.tls` turns Java key and trust stores into PEM.
* :mod:`~dagger.kafka.dead_letters`: where a job's and a stream's dead letters go (the writers are
  :mod:`dagger.dead_letter`'s, below this package, with librdkafka's log lines kept readable by
  :mod:`dagger.librdkafka_logs`).
* The C helper that moves records between librdkafka and Arrow buffers (:mod:`~dagger.kafka.native`) and the
  columnar producer built on it (:mod:`~dagger.kafka.producer`).
"""
