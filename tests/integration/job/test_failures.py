"""Failures a running job meets, each with exact accounting of what was read and written (issue 26)."""

from __future__ import annotations

import json
import logging
import subprocess
import time

import pytest

from dagger.errors import DescriptorFetchError
from testing.descriptor_server import DescriptorServer
from testing.produce import consume_all, produce, topic_size
from testing.samples import bookings, message_class
from tests.conftest import DESCRIPTORS, START, job, kafka_sink, kafka_stream, run_job, sink_written

pytestmark = [pytest.mark.integration, pytest.mark.chaos]
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
    assert sink_written(manager) == 10  # the new records only
    assert topic_size(broker.bootstrap, out) == 20
    rows = [Summary.FromString(m.value()).order_number for m in consume_all(broker.bootstrap, out, expected=20)]
    assert sorted(rows) == sorted(f"order-{i}" for i in range(20))
    with pytest.raises(DescriptorFetchError, match="cannot fetch descriptor set"):  # a new checkpoint has no copy
        run_job(spark, data, tmp_path / "elsewhere")


def _last_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def test_sigterm_mid_batch_finishes_the_batch_commits_its_offsets_and_exits_0(broker, stencil, topic, tmp_path):
    """A pod being stopped: the micro-batch that runs finishes, its offsets reach the consumer group, exit 0; what
    the group has committed is exactly what reached the output topic (a SELECT without a filter)."""
    import signal

    from confluent_kafka import Consumer, TopicPartition

    from tests.integration.job.test_cli_jobs import _start, _wait_for_output, _written

    source, out = topic("sigterm", 2), topic("sigterm-out")
    total = 20000  # 200 back-to-back micro-batches (the default trigger): still running when the signal comes
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START, step_seconds=0.01)), partitions=2)
    stream = kafka_stream(broker, source)
    data = job(
        stencil,
        [stream],
        "SELECT order_number FROM data_stream_0",
        SPARK_MAX_RECORDS_PER_TRIGGER="100",
        METRIC_PROMETHEUS_PORT="0",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    config, log = tmp_path / "job.json", tmp_path / "run.log"
    config.write_text(json.dumps(data))
    process = _start(config, tmp_path / "cp", log)
    _wait_for_output(broker.bootstrap, out, 300, process, log)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 0, log.read_text()[-3000:]
    # within a pod's grace period (30 s by default): the stop does not wait for a moment between two batches
    assert time.monotonic() - signalled < 30
    output = log.read_text()
    assert "received SIGTERM: finishing the current micro-batch, then stopping" in output
    written = topic_size(broker.bootstrap, out)
    assert 300 <= written < total  # stopped mid-stream
    assert written == _written(log)  # every delivered record was counted: nothing half-written
    group = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": stream["SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID"]}
    )
    committed = group.committed([TopicPartition(source, p) for p in (0, 1)], timeout=10)
    group.close()
    assert sum(tp.offset for tp in committed) == written  # the group is where the output is, to the record


@pytest.fixture
def proxied_broker():
    """Apache Kafka, which clients reach through a TCP proxy, which the test can cut and restore."""
    from testing.broker import Broker, free_port
    from testing.tcp_proxy import TcpProxy

    port = free_port()
    with TcpProxy(("127.0.0.1", port)) as proxy, Broker(port=port, advertised_port=proxy.port) as broker:
        yield broker, proxy


def _outage_job(broker, stencil, source: str, out: str, **extra) -> dict:
    """The source reaches the brokers through the proxy, the sink directly: a cut is met by the source's planning
    (the sink's retries would otherwise absorb it inside a micro-batch, unseen by the source)."""
    from types import SimpleNamespace

    direct = SimpleNamespace(bootstrap=broker.direct_bootstrap)
    return job(
        stencil,
        [kafka_stream(broker, source, **extra.pop("stream", {}))],
        "SELECT order_number FROM data_stream_0",
        SPARK_MAX_RECORDS_PER_TRIGGER="100",
        SPARK_TRIGGER_INTERVAL_MS="500",
        METRIC_PROMETHEUS_PORT="0",
        **extra,
        **kafka_sink(direct, out, "dagger.examples.BookingSummaryMessage"),
    )


def _story(log) -> str:
    """The job's log without its per-batch lines: what happened around an outage, for a failing assertion."""
    routine = ("INFO  dagger: batch ", "INFO  dagger: sinks: ", "ProcessingTimeExecutor: Current batch is falling")
    return "\n".join(line for line in log.read_text().splitlines() if not any(r in line for r in routine))[-4000:]


def _orders(bootstrap: str, out: str) -> list[str]:
    size = topic_size(bootstrap, out)
    return [Summary.FromString(m.value()).order_number for m in consume_all(bootstrap, out, expected=size)]


@pytest.mark.long
def test_a_commit_while_the_brokers_are_unreachable_ends_within_its_timeout_and_the_next_one_lands(
    proxied_broker, caplog
):
    """A consumer's own commit waits for the group's coordinator without end while the brokers are unreachable
    (docs/investigations/commit_while_unreachable.py); one did inside a job's planning, and the job outlived its
    SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS by minutes. The reader's commit ends, says why, and the next one lands."""
    import threading

    from confluent_kafka import Consumer, TopicPartition

    from dagger.formats.proto import Proto
    from dagger.kafka.source.commits import COMMIT_TIMEOUT_SECONDS
    from dagger.kafka.source.reader import KafkaStreamReader
    from dagger.kafka.source.spec import KafkaSourceSpec

    broker, proxy = proxied_broker
    broker.create_topic("commits", 2)
    produce(broker.bootstrap, "commits", ((None, v) for v in bookings(40, START)), partitions=2)
    spec = KafkaSourceSpec(
        table="t",
        topic_pattern="commits",
        client_config={"bootstrap.servers": broker.bootstrap, "group.id": "g-commits"},
        records=Proto.options_for((DESCRIPTORS / "examples.desc").read_bytes(), "dagger.examples.BookingLogMessage", 5),
    )
    reader = KafkaStreamReader(spec)

    def committed() -> list[int]:
        group = Consumer({"bootstrap.servers": broker.direct_bootstrap, "group.id": "g-commits"})
        try:
            return [tp.offset for tp in group.committed([TopicPartition("commits", p) for p in (0, 1)], timeout=10)]
        finally:
            group.close()

    try:
        reader.commit({"@table": "t", "commits:0": 5, "commits:1": 6})
        assert committed() == [5, 6]
        proxy.cut()
        call = threading.Thread(target=reader.commit, args=({"@table": "t", "commits:0": 10, "commits:1": 11},))
        with caplog.at_level(logging.WARNING, logger="dagger"):
            call.start()
            call.join(COMMIT_TIMEOUT_SECONDS + 20)  # a bound on a hang, not a speed target
        assert not call.is_alive(), "the commit is still waiting for the brokers"
        assert "stream 't': committing offsets to group g-commits failed: " in caplog.text, caplog.text
        assert committed() == [5, 6]  # it did not land (asked past the proxy)
        proxy.restore()
        reader.commit({"@table": "t", "commits:0": 12, "commits:1": 13})
        assert committed() == [12, 13]
    finally:
        proxy.restore()
        reader.stop()


@pytest.mark.long
def test_brokers_unreachable_for_30_s_mid_run_the_job_waits_and_loses_nothing(proxied_broker, stencil, tmp_path):
    import collections
    import signal
    import time

    from tests.integration.job.test_cli_jobs import _start, _wait_for_output

    broker, proxy = proxied_broker
    source, out, total = "outage-in", "outage-out", 3000
    broker.create_topic(source, 2)
    broker.create_topic(out, 1)
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START, step_seconds=0.01)), partitions=2)
    config, log = tmp_path / "job.json", tmp_path / "run.log"
    config.write_text(json.dumps(_outage_job(broker, stencil, source, out)))
    process = _start(config, tmp_path / "cp", log)
    _wait_for_output(broker.bootstrap, out, 300, process, log)
    proxy.cut()
    time.sleep(30)
    assert process.poll() is None, log.read_text()[-3000:]  # still running
    proxy.restore()
    _wait_for_output(broker.bootstrap, out, total, process, log, timeout=300)
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 0, log.read_text()[-3000:]
    output = log.read_text()
    # one line when they went, not one per attempt: from the planning, or from the task that was reading when they
    # went (the planning, which runs after it, finds them back)
    assert output.count("do not answer") == 1, _story(log)
    assert output.count("answer again") == 1, _story(log)  # and one when they came back
    counts = collections.Counter(_orders(broker.bootstrap, out))
    assert set(counts) == {f"order-{i}" for i in range(total)}  # nothing lost
    assert sum(c - 1 for c in counts.values()) <= 100  # at-least-once: at most one micro-batch again


@pytest.mark.long
def test_brokers_unreachable_past_the_deadline_fail_the_job_naming_them_and_a_restart_resumes(
    proxied_broker, stencil, tmp_path
):
    import collections

    from tests.conftest import dagger
    from tests.integration.job.test_cli_jobs import _start, _wait_for_output

    broker, proxy = proxied_broker
    source, out, total = "deadline-in", "deadline-out", 3000
    broker.create_topic(source, 2)
    broker.create_topic(out, 1)
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START, step_seconds=0.01)), partitions=2)
    data = _outage_job(
        broker,
        stencil,
        source,
        out,
        stream={"SOURCE_KAFKA_UNREACHABLE_TIMEOUT_MS": "5000"},
        SINK_KAFKA_PRODUCER_CONFIG={"message.timeout.ms": "5000"},
    )
    config, log = tmp_path / "job.json", tmp_path / "run.log"
    config.write_text(json.dumps(data))
    process = _start(config, tmp_path / "cp", log)
    _wait_for_output(broker.bootstrap, out, 300, process, log)
    proxy.cut()
    try:
        code = process.wait(180)
    except subprocess.TimeoutExpired:  # its log says where it waits
        process.kill()
        raise AssertionError(f"no end within 180 s of the cut: {log.read_text()[-3000:]}") from None
    assert code == 1, log.read_text()[-3000:]
    last = [line for line in log.read_text().splitlines() if line.strip()][-1]
    assert "query failed:" in last and broker.bootstrap in last, last
    proxy.restore()
    result = dagger("run", str(config), "--checkpoint-dir", str(tmp_path / "cp"), "--available-now")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = collections.Counter(_orders(broker.bootstrap, out))
    assert set(counts) == {f"order-{i}" for i in range(total)}  # the restart resumed: nothing lost
    assert sum(c - 1 for c in counts.values()) <= 100


#: loaded by every Python process of a killed job (driver, source runner, fork server and the workers it forks)
#: through PYTHONPATH: it marks the start and the end of the two calls the kills aim at in a trace file, and holds
#: each call for a moment after its start mark, so that a kill sent on seeing the mark lands inside the call
_TRACE_SITECUSTOMIZE = """
import os, time

_trace = os.environ.get("DAGGER_TEST_TRACE")
if _trace:
    def _mark(what):
        with open(_trace, "a") as handle:
            handle.write(f"{what} {os.getpid()} {time.time():.3f}\\n")

    def _wrap(cls, name, label):
        original = getattr(cls, name)

        def traced(self, *args, **kwargs):
            _mark(label + "-start")
            time.sleep(1.5)
            try:
                return original(self, *args, **kwargs)
            finally:
                _mark(label + "-end")

        setattr(cls, name, traced)

    from dagger.kafka.sink import _KafkaWriter
    from dagger.kafka.source.reader import KafkaStreamReader

    _wrap(KafkaStreamReader, "commit", "commit")
    _wrap(_KafkaWriter, "flush", "flush")
"""


def _trace_lines(trace) -> list[tuple[str, float]]:
    if not trace.exists():
        return []
    return [(line.split()[0], float(line.split()[2])) for line in trace.read_text().splitlines() if line.strip()]


@pytest.mark.long
def test_the_job_killed_ten_times_inside_offset_commits_and_sink_flushes_loses_nothing(
    broker, stencil, topic, tmp_path
):
    """kill -9 of the whole job (driver, its Python workers and data source runners) five times while it commits
    processed offsets to the consumer group and five times while its Kafka sink flushes a micro-batch's records,
    each kill shown to have landed inside that call (its start marked, its end never); then a restart from the
    checkpoint each time, and the output is every record at least once."""
    import collections
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT, dagger

    source, out, total, per_batch = topic("kills", 2), topic("kills-out"), 6000, 200
    produce(broker.bootstrap, source, ((None, v) for v in bookings(total, START, step_seconds=0.01)), partitions=2)
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT order_number FROM data_stream_0",
        SPARK_MAX_RECORDS_PER_TRIGGER=str(per_batch),
        SPARK_TRIGGER_INTERVAL_MS="300",
        METRIC_PROMETHEUS_PORT="0",
        # the calls traced are Dagger's reader's commit and Dagger's writer's flush, in their Python processes
        # (auto would read and write this job in the JVM)
        SPARK_KAFKA_CONNECTOR="dagger",
        **kafka_sink(broker, out, "dagger.examples.BookingSummaryMessage"),
    )
    config = tmp_path / "job.json"
    config.write_text(json.dumps(data))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_TRACE_SITECUSTOMIZE)
    trace = tmp_path / "trace.log"
    env = dict(os.environ, DAGGER_TEST_TRACE=str(trace), PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    landed: list[str] = []
    runs = 0
    for attempt in range(20):
        if len(landed) == 10:
            break
        target = "commit" if landed.count("commit") < 5 else "flush"
        log = tmp_path / f"run-{attempt}.log"
        launched = time.time()
        runs += 1
        with open(log, "w") as output:  # its own process group: the JVM and the Python workers die with it
            process = subprocess.Popen(
                [sys.executable, "-m", "dagger", "run", str(config), "--checkpoint-dir", str(tmp_path / "cp")],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # kill on the first start mark of the target call in this run (a second one: the first's end was seen)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            marks = [(m, t) for m, t in _trace_lines(trace) if t >= launched and m.startswith(target)]
            if marks and marks[-1][0] == f"{target}-start":
                os.killpg(process.pid, signal.SIGKILL)
                killed_at = time.time()
                break
            if process.poll() is not None:
                raise AssertionError(f"the job ended by itself:\n{log.read_text()[-3000:]}")
            time.sleep(0.02)
        else:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"no {target} began within 180 s:\n{log.read_text()[-3000:]}")
        process.wait(30)
        time.sleep(1)  # a worker that outlived the driver for a moment would have marked its end by now
        after = [m for m, t in _trace_lines(trace) if t >= launched and m.startswith(target)]
        if after[-1] == f"{target}-start":  # its end never came: the kill landed inside the call
            landed.append(target)
        assert killed_at - launched < 180
    assert landed == ["commit"] * 5 + ["flush"] * 5, landed
    result = dagger("run", str(config), "--checkpoint-dir", str(tmp_path / "cp"), "--available-now")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = collections.Counter(_orders(broker.bootstrap, out))
    assert set(counts) == {f"order-{i}" for i in range(total)}  # nothing lost
    assert sum(c - 1 for c in counts.values()) <= runs * per_batch  # at most the running micro-batch per kill
