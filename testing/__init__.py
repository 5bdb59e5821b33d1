"""Local servers and helpers used by ``make quickstart``, the tests and the benchmarks: Apache Kafka (one KRaft
node, jars from Maven Central), a descriptor-set HTTP server, the other services' test servers and a sample
producer.

This package lives beside ``dagger/``, not in it: the wheel, the image and the executor zip ship none of it, and its
dependencies are the ``test`` extra's. Tests import it from the checkout (pytest's ``pythonpath``), the bench and
the scripts put the checkout on ``sys.path``.
"""
