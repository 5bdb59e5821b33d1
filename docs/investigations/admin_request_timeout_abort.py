"""librdkafka's admin requests across a broker outage: ``alter_consumer_group_offsets`` with a request timeout while
a TCP proxy cuts the broker, then restores it. Nothing of Dagger's product code is in the path: confluent-kafka,
Apache Kafka and the tests' TCP proxy (``testing/``). Run from the repository's root:
``.venv/bin/python docs/investigations/admin_request_timeout_abort.py [cycles] [--bounded]``.

By default each request has a 2-s request timeout of its own. With ``--bounded``, what the project does instead:
each request gets librdkafka's longest request timeout (one hour), the wait for its answer is bounded from outside
(2 s), and a client whose answer was late is dropped for a new one."""

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is docs/investigations/)
sys.path.insert(0, str(ROOT))


def main() -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    args = [a for a in sys.argv[1:] if a != "--bounded"]
    bounded = "--bounded" in sys.argv

    from testing.broker import Broker, free_port
    from testing.tcp_proxy import TcpProxy

    port = free_port()
    with TcpProxy(("127.0.0.1", port)) as proxy, Broker(port=port, advertised_port=proxy.port) as broker:
        broker.create_topic("t", 2)
        p = Producer({"bootstrap.servers": broker.direct_bootstrap})
        [p.produce("t", b"x", partition=i % 2) for i in range(100)]
        p.flush()
        clients = [AdminClient({"bootstrap.servers": broker.bootstrap})]

        def commit(n):
            req = ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, n), TopicPartition("t", 1, n)])
            try:
                if bounded:
                    clients[0].alter_consumer_group_offsets([req], request_timeout=3600)["g"].result(timeout=2)
                else:
                    clients[0].alter_consumer_group_offsets([req], request_timeout=2)["g"].result(timeout=3)
                return "ok"
            except KafkaException as e:
                return e.args[0].str()[:60]
            except TimeoutError:
                if bounded:  # drop the client, its request still waiting
                    clients[0] = AdminClient({"bootstrap.servers": broker.bootstrap})
                return "timeout"

        for cycle in range(int(args[0]) if args else 3):
            print(cycle, "before", commit(1), flush=True)
            proxy.cut()
            t0 = time.monotonic()
            while time.monotonic() - t0 < 12:
                print(cycle, "cut", commit(2), flush=True)
            proxy.restore()
            for _ in range(6):
                print(cycle, "back", commit(3), flush=True)
                time.sleep(0.3)
        print("no abort", flush=True)


if __name__ == "__main__":
    main()
