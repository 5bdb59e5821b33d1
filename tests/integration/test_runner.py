"""The tests of tests/unit/test_runner.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import uuid

import pytest

from dagger.runner import JobRunner
from tests.unit import test_runner as unit_file

saved_signals = unit_file.saved_signals  # the unit file's fixture, which the test below asks for


@pytest.mark.integration
def test_a_second_signal_stops_a_long_micro_batch_at_once(
    spark, broker, stencil, topic, tmp_path, saved_signals, caplog
):
    from dagger.job import Job, load_config
    from testing.produce import produce, topic_size
    from testing.samples import bookings
    from tests.conftest import START, job, kafka_sink, kafka_stream

    slow = tmp_path / "slowly.py"
    slow.write_text("import time\n\n\ndef slowly(x: str) -> str:\n    time.sleep(0.1)\n    return x\n")
    source, out = topic("slow"), topic("slow-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(300, START)))  # ~30 s of UDF calls
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT SLOWLY(order_number) AS order_number, customer_id FROM data_stream_0",
        PYTHON_UDF_ENABLE="true",
        PYTHON_UDF_CONFIG=json.dumps({"PYTHON_FILES": str(slow)}),
        SPARK_KAFKA_READ_BATCH_SIZE="300",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    manager = Job(load_config(data=data), checkpoint_dir=str(tmp_path / f"cp-{uuid.uuid4().hex[:6]}"), spark=spark)
    runner = JobRunner(manager, progress_interval=3600)
    signals = []

    def interrupt() -> None:  # twice, while the first micro-batch runs
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            query = runner.query
            if query is not None and query.status.get("isTriggerActive") and query.status.get("isDataAvailable"):
                break
            time.sleep(0.1)
        time.sleep(2)
        for _ in range(2):
            signals.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    with caplog.at_level(logging.INFO, logger="dagger"):
        assert runner.run() == 0
    thread.join(5)
    assert len(signals) == 2
    assert "received SIGINT again: stopping at once" in caplog.text
    assert runner.query.lastProgress is None  # the micro-batch never finished: it was cut short
    # the UDF gets rows 100 at a time (10 s of sleeps each): the writer had not produced a record when it was cut
    assert topic_size(broker.bootstrap, out) == 0
    assert manager.counters.sinks["kafka"]["written"].value == 0
