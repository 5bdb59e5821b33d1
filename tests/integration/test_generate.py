"""The tests of tests/unit/test_generate.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from google.protobuf import message_factory

from dagger.schema.descriptor_sets import DescriptorSet
from tests.unit.test_generate import ROOT, START


@pytest.mark.integration
def test_cli_generates_a_jobs_stream_over_partitions_and_throttles(broker, stencil, topic, tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    from dagger.cli import main
    from testing.produce import consume_all

    target = f"generated-{time.monotonic_ns()}"
    config = json.loads((ROOT / "configs" / "quickstart.json").read_text())
    config["STREAMS"][0]["SOURCE_KAFKA_TOPIC_NAMES"] = target
    config["STREAMS"][0]["SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS"] = broker.bootstrap
    config["SCHEMA_REGISTRY_STENCIL_URLS"] = stencil.url("examples.desc")
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    args = ["generate", "--config", str(path), "--count", "3000", "--partitions", "3", "--rate", "2000"]
    assert main([*args, "--start", "2026-11-22T10:00:00Z", "--events-per-second", "100"]) == 0
    records = consume_all(broker.bootstrap, target, expected=3000)
    assert len(records) == 3000
    by_partition = {p: sum(1 for r in records if r.partition() == p) for p in range(3)}
    assert by_partition == {0: 1000, 1: 1000, 2: 1000}
    # the end offsets are exact (each partition ends with a single-record batch), so a bounded job sees all
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets"})
    ends = [reader.get_watermark_offsets(TopicPartition(target, p), timeout=10)[1] for p in range(3)]
    reader.close()
    assert ends == [1000, 1000, 1000]
    Booking = message_factory.GetMessageClass(  # noqa: N806
        DescriptorSet([("x", (ROOT / "descriptors" / "examples.desc").read_bytes())]).find_message(
            "dagger.examples.BookingLogMessage"
        )
    )
    stamps = sorted(Booking.FromString(r.value()).event_timestamp.ToDatetime(dt.UTC) for r in records)
    assert stamps[0] == START and stamps[-1] == START + dt.timedelta(seconds=29.99)
    # --rate 2000: 3000 records are spread over about 1.5 s of produce time, not sent in one burst
    produced_at = sorted(r.timestamp()[1] for r in records)
    assert produced_at[-1] - produced_at[0] >= 1200
    with pytest.raises(SystemExit):
        main(["generate", "--count", "x"])
    assert main(["generate", "--topic", "t"]) == 2  # --message, --bootstrap-servers, --stencil-url missing
