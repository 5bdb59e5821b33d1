"""Real-time mode's planning that needs no Spark: the options of Spark's Kafka source from a stream's keys (a job
in real-time mode runs in tests/integration/sources/test_realtime.py)."""

from __future__ import annotations

import json

from dagger.job import load_config
from dagger.realtime import _kafka_options
from tests.unit.config.test_config import BASE, STREAM


def test_additional_consumer_configurations_reach_sparks_kafka_source_as_kafka_options():
    extra = {"fetch.min.bytes": "4096", "client.rack": "zone-b"}
    stream = {**STREAM, "SOURCE_KAFKA_CONSUMER_ADDITIONAL_CONFIGURATIONS": json.dumps(extra)}
    config = load_config(data={**BASE, "STREAMS": [stream]})
    options = _kafka_options(config.STREAMS[0], config, resolve=False)  # resolve=False: no consumer group asked
    assert (options["kafka.fetch.min.bytes"], options["kafka.client.rack"]) == ("4096", "zone-b")
