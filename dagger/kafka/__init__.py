"""What Dagger's Kafka source, Kafka sink and dead-letter output share: librdkafka's log lines kept readable
(:mod:`~dagger.kafka.logs`), Java key and trust stores turned into PEM (:mod:`~dagger.kafka.tls`), the C helper
that moves records between librdkafka and Arrow buffers (:mod:`~dagger.kafka.native`) and the columnar producer
built on it (:mod:`~dagger.kafka.producer`). The source itself is :mod:`dagger.sources.kafka`, the sink
:mod:`dagger.sinks.kafka`.
"""
