"""Reading exactly from the embedded broker (tansu 0.6, in-memory storage), whose offsets cannot all be trusted.

tansu 0.6 has two defects that real Kafka does not (reproduced with plain confluent-kafka clients by
``scripts/tansu_visibility.py``; see ``docs/brokers.md``):

1. ``ListOffsets(latest)`` answers with the base offset + 1 of the batch it stored last, so the rest of a
   multi-record batch is invisible to end-offset queries until another batch arrives. The high watermark in a
   fetch response is right. :func:`fetch_high_watermarks` asks the fetch path for it.
2. A produce reserves its offsets (advances the high watermark) before it stores the batch. A fetch that runs in
   between, after a concurrent producer's later batch is stored, returns that later batch, and the reader's
   position moves past records that are acknowledged and do arrive a moment later. :func:`contiguous_prefix`
   finds such a gap so that the reader can go back for it.

On tansu a partition of a non-transactional topic has no legitimate gaps, so the Kafka source verifies gaps (and
asks the fetch path for partition ends) only when the cluster is one (:func:`is_embedded`); other brokers are
read exactly as before, at no cost.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dagger.kafka_logging import quiet

# tansu's default cluster id (``tansu broker --cluster-id``), which the metadata response carries
EMBEDDED_CLUSTER_IDS = frozenset({"tansu_cluster"})

#: ``fetch.wait.max.ms`` of the probes that plan micro-batches (the high-watermark and event-time probes). The embedded
#: broker answers a fetch with no records when reading them takes longer than the fetch may wait, and that time grows
#: with the batches a partition holds and the broker's load: in the soak, after ~1,100 batches a 10 or 20 ms wait got
#: nothing, ever (50 ms still did),
#: so a probe timed out every micro-batch (docs/brokers.md, defect 4; ``scripts/tansu_fetch_cost.py``). The wait is
#: paid on every micro-batch's planning, though (stateless bench: 529k records/s at 10 ms, 459k at 100, 326k at 500),
#: so it is twice the shortest wait seen to work, not librdkafka's 500 ms default.
FETCH_WAIT_MS = "100"
#: ``fetch.wait.max.ms`` of consumers that read records they know exist up to a known end (a range's reader, the
#: timestamp seeks, the test readers): such a fetch returns once records are there, and the broker's time to store
#: them under load has stayed under this through the 30-minute soaks; a longer wait is paid wherever a read meets
#: a partition's end
READ_FETCH_WAIT_MS = "50"

# re-reads of one gap before it is accepted as real (a transaction marker, say); waits 0.05, 0.2, 0.8 … s
GAP_RETRIES = 5


def is_embedded(cluster_id: str | None) -> bool:
    """Whether a metadata response's cluster id is the embedded broker's."""
    return cluster_id in EMBEDDED_CLUSTER_IDS


def gap_wait(attempt: int) -> float:
    """Seconds to wait before the ``attempt``-th re-read of a gap (the missing batch is being stored)."""
    return 0.05 * 4**attempt


def contiguous_prefix(offsets: np.ndarray, position: int) -> int:
    """How many of ``offsets`` continue from ``position`` one by one, before the first gap."""
    n = len(offsets)
    if n == 0:
        return 0
    wrong = np.flatnonzero(offsets != position + np.arange(n, dtype=np.int64))
    return n if len(wrong) == 0 else int(wrong[0])


class HighWatermarkProbe:
    """The fetch path's high watermark of partitions: a consumer assigned one record before each partition's
    listed end reads that record, and the fetch response's high watermark is taken from librdkafka's cache."""

    def __init__(self, client_config: dict[str, str], fetch_wait_ms: str = FETCH_WAIT_MS):
        self._config = {
            **client_config,
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "fetch.wait.max.ms": fetch_wait_ms,
        }
        self._consumer: Any = None
        #: the keys of the last :meth:`highs` call that got no answer in time (their listed end may be short)
        self.unanswered: list[str] = []

    def highs(self, marks: dict[str, tuple[str, int, int, int]], timeout_s: float = 10.0) -> dict[str, int]:
        """``{key: high}`` for ``marks`` = ``{key: (topic, partition, low, listed_high)}``; partitions with no
        record, or that did not answer within ``timeout_s``, are left out (the caller keeps the listed end)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        wanted = {k: v for k, v in marks.items() if v[3] > v[2]}
        self.unanswered = []
        if not wanted:
            return {}
        if self._consumer is None:
            self._consumer = Consumer(quiet(self._config))
        consumer = self._consumer
        consumer.assign([TopicPartition(topic, p, high - 1) for topic, p, _low, high in wanted.values()])
        try:
            pending = {(topic, p): k for k, (topic, p, _l, _h) in wanted.items()}
            answered: list[str] = []
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                # as many as partitions wait: consume() returns once it has them (1,000 waited out the timeout)
                for m in consumer.consume(len(pending), timeout=0.05):
                    error = m.error()
                    if error is None or error.code() == KafkaError._PARTITION_EOF:
                        key = pending.pop((m.topic(), m.partition()), None)
                        if key is not None:
                            answered.append(key)
            self.unanswered = sorted(pending.values())
            out = {}
            for key in answered:
                topic, p, _low, listed = wanted[key]
                _cached_low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                if high > listed:
                    out[key] = high
            return out
        finally:
            consumer.unassign()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
