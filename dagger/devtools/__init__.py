"""Local servers and helpers used by ``make quickstart``, the tests and the benchmarks: Apache Kafka (one KRaft
node, jars from Maven Central), a descriptor-set HTTP server, the other services' test servers and a sample
producer."""
