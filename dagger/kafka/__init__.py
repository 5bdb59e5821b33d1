"""Everything Kafka, in one package.

* :mod:`~dagger.kafka.source`: the Kafka source (``SOURCE_NAME`` ``KAFKA_SOURCE``/``KAFKA_CONSUMER``): Dagger's
  own reader, a Python data source reading librdkafka's batches into Arrow, with its positions, group commits and
  event-time alignment; or Spark's own Kafka source with the JVM decoders (:mod:`~dagger.kafka.source.spark`).
* :mod:`~dagger.kafka.sink`: the Kafka sink (``SINK_TYPE`` ``kafka``): its records (value and key parts), their
  Schema Registry use, reading back what it wrote for ``dagger test``; or Spark's own Kafka sink with the JVM
  encoders (:mod:`~dagger.kafka.sink.spark`).
* :mod:`~dagger.kafka.spark_connector`: which jobs Spark's Kafka source and sink can run, in real-time mode and in
  micro-batches (``SPARK_KAFKA_CONNECTOR``), and the task slots they hold.
* :mod:`~dagger.kafka.client`: a stream's consumer settings; :mod:`~dagger.kafka.java_client` translates
  librdkafka's names into the Java client's.
* What the others share: librdkafka's log lines kept readable (:mod:`~dagger.kafka.logs`), Java key and trust
  stores turned into PEM (:mod:`~dagger.kafka.tls`), the C helper that moves records between librdkafka and Arrow
  buffers (:mod:`~dagger.kafka.native`) and the columnar producer built on it (:mod:`~dagger.kafka.producer`).
"""
