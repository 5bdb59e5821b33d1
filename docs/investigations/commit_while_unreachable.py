"""A consumer's commit while the brokers are unreachable: confluent-kafka and Apache Kafka only.

A synchronous ``Consumer.commit`` waits for the group's coordinator without end, and ``close`` after an
asynchronous one waits too; the admin API's ``alter_consumer_group_offsets`` ends within its request timeout.
Nothing of Dagger is in the path: the broker is Apache Kafka (``testing.broker``) and a TCP proxy in front
of it stands for the network (``testing.tcp_proxy``: cut = connections reset and refused).

    .venv/bin/python docs/investigations/commit_while_unreachable.py

Printed on 2026-11-26 (confluent-kafka 2.x, librdkafka bundled, Kafka 4.1.1):

    Consumer.commit(asynchronous=False) during the cut: still waiting after 90 s
    Consumer.close() after an asynchronous commit during the cut: still waiting after 60 s
    AdminClient.alter_consumer_group_offsets during the cut: KafkaException ... Local: Timed out ... after 10.0 s

Second, an admin client whose request failed during a cut, asked again at once after the restore (its
``Starting re-bootstrap sequence`` in librdkafka's debug log), sometimes waits out its whole request timeout
although the broker answers again; a new client's request lands. Printed on 2026-11-26 (11 of 30 in a first
run of 30 rounds):

    after the restore, the same admin client's next commit timed out in 3 of 10 rounds; a new client's landed in 3
    of 3
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: the test broker in testing/

from testing.broker import Broker, free_port  # noqa: E402
from testing.tcp_proxy import TcpProxy  # noqa: E402


def _within(call, seconds: float) -> tuple[bool, float]:
    started = time.monotonic()
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), time.monotonic() - started


def main() -> None:
    port = free_port()
    with TcpProxy(("127.0.0.1", port)) as proxy, Broker(port=port, advertised_port=proxy.port) as broker:
        broker.create_topic("t", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for _ in range(10):
            producer.produce("t", b"x")
        producer.flush()
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": "false", "log_level": 0}
        sync, closing = Consumer(conf), Consumer(conf)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        for consumer in (sync, closing):
            consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)  # the coordinator is known
        proxy.cut()

        done, took = _within(lambda: sync.commit(offsets=[TopicPartition("t", 0, 2)], asynchronous=False), 90)
        print(
            f"Consumer.commit(asynchronous=False) during the cut: {'returned' if done else 'still waiting'} "
            f"after {took:.0f} s"
        )

        closing.commit(offsets=[TopicPartition("t", 0, 2)], asynchronous=True)
        closing.poll(1.0)
        done, took = _within(closing.close, 60)
        print(
            f"Consumer.close() after an asynchronous commit during the cut: "
            f"{'returned' if done else 'still waiting'} after {took:.0f} s"
        )

        started = time.monotonic()
        request = ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, 2)])
        try:
            admin.alter_consumer_group_offsets([request], request_timeout=10)["g"].result(timeout=11)
            outcome = "committed"
        except Exception as exc:  # noqa: BLE001 - what it raises is the finding
            outcome = f"{type(exc).__name__} {exc}"
        print(
            f"AdminClient.alter_consumer_group_offsets during the cut: {outcome} after "
            f"{time.monotonic() - started:.1f} s"
        )


def after_restore(rounds: int = 10) -> None:
    port = free_port()
    with TcpProxy(("127.0.0.1", port)) as proxy, Broker(port=port, advertised_port=proxy.port) as broker:
        broker.create_topic("t", 2)
        stuck = fresh = 0
        for round_ in range(rounds):
            group = f"g{round_}"

            def alter(admin: AdminClient, offset: int, group: str = group) -> bool:
                request = ConsumerGroupTopicPartitions(group, [TopicPartition("t", p, offset) for p in (0, 1)])
                try:
                    admin.alter_consumer_group_offsets([request], request_timeout=10)[group].result(timeout=11)
                    return True
                except Exception:  # noqa: BLE001 - a failure is the finding
                    return False

            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
            while not alter(admin, 5):  # the group's coordinator loads first
                time.sleep(0.5)
            proxy.cut()
            alter(admin, 10)
            proxy.restore()
            if not alter(admin, 12):
                stuck += 1
                fresh += alter(AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0}), 12)
        print(
            f"after the restore, the same admin client's next commit timed out in {stuck} of {rounds} rounds; "
            f"a new client's landed in {fresh} of {stuck}"
        )


if __name__ == "__main__":
    main()
    after_restore()
