"""Failures a running job meets, each with exact accounting of what was read and written (issue 26)."""

from __future__ import annotations

import logging

import pytest

from dagger.devtools.descriptor_server import DescriptorServer
from dagger.devtools.produce import consume_all, produce, topic_size
from dagger.devtools.samples import bookings, message_class
from dagger.errors import DescriptorFetchError
from tests.conftest import DESCRIPTORS, START, job, kafka_sink, kafka_stream, run_job

pytestmark = pytest.mark.integration
Summary = message_class("dagger.examples.BookingSummaryMessage")


def test_a_restart_goes_on_with_the_kept_descriptors_while_their_server_is_down(spark, broker, topic, tmp_path, caplog):
    source, out = topic("desc-down"), topic("desc-down-out")
    values = bookings(20, START)
    produce(broker.bootstrap, source, ((None, v) for v in values[:10]))
    server = DescriptorServer(DESCRIPTORS).start()
    data = job(
        server,
        [kafka_stream(broker, source)],
        "SELECT order_number FROM data_stream_0",
        SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES="0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    server.stop()  # the descriptor server is down when the job restarts
    produce(broker.bootstrap, source, ((None, v) for v in values[10:]))
    with caplog.at_level(logging.WARNING, logger="dagger"):
        manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert "going on with the copy of the descriptor sets this job's checkpoint keeps" in caplog.text
    assert manager.sink_counters["kafka"]["written"].value == 10  # the new records only
    assert topic_size(broker.bootstrap, out) == 20
    rows = [Summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, expected=20)]
    assert sorted(rows) == sorted(f"order-{i}" for i in range(20))
    with pytest.raises(DescriptorFetchError, match="cannot fetch descriptor set"):  # a new checkpoint has no copy
        run_job(spark, data, tmp_path / "elsewhere")
