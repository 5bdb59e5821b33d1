"""Descriptor sets changed under a running job (SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH): a compatible change
(a new field, a new enum value) is taken between micro-batches without losing or re-reading a record; an
incompatible one stops the job naming the field."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from google.protobuf import descriptor_pb2, message_factory

from dagger.schema.descriptor_sets import DescriptorSet
from testing.descriptor_server import DescriptorServer
from testing.produce import consume_all, produce
from testing.samples import EXAMPLES_DESC, bookings
from tests.conftest import ROOT, START, job, json_sink, kafka_sink, kafka_stream

pytestmark = pytest.mark.integration
BOOKING = "dagger.examples.BookingLogMessage"
SUMMARY = "dagger.examples.BookingSummaryMessage"


def changed_set(change: str) -> bytes:
    """examples.desc with ``change``: ``compatible`` adds field 99 ``surge_factor`` and the enum value
    ``GO_TELEPORT``; ``incompatible`` makes ``order_number`` an int64."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(EXAMPLES_DESC.read_bytes())
    for file in fds.file:
        for message in file.message_type:
            if f"{file.package}.{message.name}" != BOOKING:
                continue
            if change == "compatible":
                message.field.add(
                    name="surge_factor",
                    number=99,
                    type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                    json_name="surgeFactor",
                )
            else:
                for field in message.field:
                    if field.name == "order_number":
                        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
        for enum in file.enum_type:
            if enum.name == "ServiceType" and change == "compatible":
                enum.value.add(name="GO_TELEPORT", number=9)
    return fds.SerializeToString()


def _run(tmp_path, data: dict) -> tuple[subprocess.Popen, object]:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    log = (tmp_path / "job.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "dagger", "run", str(path), "--checkpoint-dir", str(tmp_path / "cp")],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return process, log


def _wait_for(path, text: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in the job's log:\n{path.read_text()[-3000:]}")


def _job(broker, served: DescriptorServer, source: str, out: str, sink: str = "json") -> dict:
    data = job(
        served,
        [kafka_stream(broker, source)],
        "SELECT order_number, service_type FROM data_stream_0",
        SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH="true",
        SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS="1500",
        **(json_sink(broker, out) if sink == "json" else kafka_sink(broker, out, SUMMARY)),
    )
    data["SCHEMA_REGISTRY_STENCIL_URLS"] = served.url("booking.desc")
    return data


def _rows(bootstrap: str, out: str, expected: int, sink: str, descriptors: bytes) -> list[dict]:
    """The output records as dicts: JSON as written; protobuf decoded with ``descriptors`` (enum values by name)."""
    records = consume_all(bootstrap, out, expected=expected)
    if sink == "json":
        return [json.loads(m.value()) for m in records]
    summary = DescriptorSet([("out", descriptors)]).find_message(SUMMARY)
    Summary = message_factory.GetMessageClass(summary)
    names = summary.fields_by_name["service_type"].enum_type.values_by_number
    rows = []
    for m in records:
        decoded = Summary.FromString(m.value())
        rows.append({"order_number": decoded.order_number, "service_type": names[decoded.service_type].name})
    return rows


# json: Dagger's reader and writer in Python workers; proto: Dagger's reader in the JVM and Spark's Kafka sink
@pytest.mark.parametrize("sink", ["json", "proto"])
def test_a_compatible_change_is_taken_between_batches_without_losing_or_rereading(broker, topic, tmp_path, sink):
    served_dir = tmp_path / "descriptors"
    served_dir.mkdir()
    (served_dir / "booking.desc").write_bytes(EXAMPLES_DESC.read_bytes())
    source, out = topic("refresh-in"), topic("refresh-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(10, START)))
    with DescriptorServer(served_dir) as served:
        process, log = _run(tmp_path, _job(broker, served, source, out, sink))
        try:
            assert len(consume_all(broker.bootstrap, out, expected=10)) == 10
            new = changed_set("compatible")
            (served_dir / "booking.desc").write_bytes(new)
            # records produced before the restarted query runs decode with the old sets, as in Dagger: wait for it
            _wait_for(tmp_path / "job.log", "the query runs again, with descriptor sets", process)
            # records of the new schema: a new enum value and the new field
            Booking = message_factory.GetMessageClass(DescriptorSet([("new", new)]).find_message(BOOKING))
            later = []
            for i in range(10, 20):
                m = Booking(order_number=f"order-{i}", service_type="GO_TELEPORT" if i % 2 else "GO_RIDE")
                m.surge_factor = 1.5
                m.event_timestamp.FromDatetime(START)
                later.append(m.SerializeToString())
            produce(broker.bootstrap, source, ((None, v) for v in later))
            rows = _rows(broker.bootstrap, out, 20, sink, new)
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(120)
            log.close()
    text = (tmp_path / "job.log").read_text()
    assert code == 0, text[-3000:]
    assert sorted(r["order_number"] for r in rows) == sorted(f"order-{i}" for i in range(20))  # once each
    teleports = [r for r in rows if r["service_type"] == "GO_TELEPORT"]
    assert len(teleports) == 5  # the new enum value decodes by its name: the query runs with the new sets
    assert "new fields data_stream_0.surge_factor" in text
    assert "restarting the query from its checkpoint after the running micro-batch" in text
    # the path the job took, before and after the restart
    started = " stream(s) by Dagger's Kafka reader in the JVM -> " if sink == "proto" else " stream(s) -> "
    assert text.count(started) == 2, text[-3000:]


def test_an_incompatible_change_stops_the_job_naming_the_field(broker, topic, tmp_path):
    served_dir = tmp_path / "descriptors"
    served_dir.mkdir()
    (served_dir / "booking.desc").write_bytes(EXAMPLES_DESC.read_bytes())
    source, out = topic("refresh-bad-in"), topic("refresh-bad-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    with DescriptorServer(served_dir) as served:
        process, log = _run(tmp_path, _job(broker, served, source, out))
        try:
            assert len(consume_all(broker.bootstrap, out, expected=5)) == 5
            (served_dir / "booking.desc").write_bytes(changed_set("incompatible"))
            code = process.wait(120)
        finally:
            if process.poll() is None:
                process.kill()
            log.close()
    text = (tmp_path / "job.log").read_text()
    assert code == 1, text[-3000:]
    last = text.strip().splitlines()[-1]
    assert "the descriptor sets changed incompatibly while the job ran" in last
    assert "table data_stream_0: field 'order_number' changed type from string to bigint" in last
