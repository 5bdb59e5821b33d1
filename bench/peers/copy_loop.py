"""The baseline: a hand-written confluent-kafka copy loop (consume -> produce in batches, no decoding), the
practical ceiling for Python on this hardware. One process per partition: ``python copy_loop.py PARTITION``;
it copies the partition from its beginning to its end into the same partition of the output topic, then exits.
"""

from __future__ import annotations

import sys
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import BOOTSTRAP, INPUT, OUTPUT  # noqa: E402


def main(partition: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": f"copy-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "fetch.max.bytes": "52428800",
            "max.partition.fetch.bytes": "10485760",
            "queued.min.messages": "1000000",  # as the job's reader: prefetch past librdkafka's 100k default
        }
    )
    consumer.assign([TopicPartition(INPUT, partition, OFFSET_BEGINNING)])
    producer = Producer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "linger.ms": "5",
            "batch.num.messages": "10000",
            "queue.buffering.max.messages": "1000000",
            "queue.buffering.max.kbytes": "1048576",
        }
    )
    done = False
    while not done:
        batch = []
        for message in consumer.consume(10000, timeout=1.0):
            error = message.error()
            if error is None:
                batch.append({"value": message.value()})
            elif error.code() == KafkaError._PARTITION_EOF:
                done = True
            else:
                raise RuntimeError(str(error))
        while batch:
            producer.produce_batch(OUTPUT, batch, partition=partition)
            batch = [m for m in batch if "_error" in m]
            for m in batch:
                del m["_error"]
            producer.poll(0.01 if batch else 0)
    producer.flush(120)
    consumer.close()


if __name__ == "__main__":
    main(int(sys.argv[1]))
