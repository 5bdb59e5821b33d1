"""Event time as Dagger (Flink) users rely on it: every record advances it, and no partition runs ahead.

* Records the SQL filters out still advance the watermark (an optimizer barrier above the watermark).
* A backlog over partitions far apart in event time loses nothing: the Kafka source reads the partitions
  aligned in event time (:mod:`dagger.kafka.source.event_time`). The measuring test runs the same job without
  alignment and counts the rows Spark drops as late.
"""

from __future__ import annotations

import collections
import datetime as dt
import uuid

from dagger.kafka.source.event_time import EventTimeAligner
from testing.produce import consume_all, produce
from testing.samples import message_class
from tests.conftest import START, job, kafka_sink, kafka_stream, run_job

Booking = message_class("dagger.examples.BookingLogMessage")
Count = message_class("dagger.examples.BookingCountMessage")
SECOND = 1_000_000
T0 = int(START.timestamp()) * SECOND


class TableProbe:
    """Event times by offset from a table: the aligner's arithmetic, apart from Kafka (probed for real below)."""

    def __init__(self, times: dict[str, list[int | None]]):
        self.table = times
        self.asked = 0

    def times(self, wanted: dict[str, int]) -> dict[str, int | None]:
        self.asked += 1
        return {k: (self.table[k][o] if o < len(self.table[k]) else None) for k, o in wanted.items()}


def per_second(start_us: int, count: int) -> list[int]:
    return [start_us + i * SECOND for i in range(count)]


def test_a_partition_an_hour_ahead_waits_for_the_slowest_one():
    probe = TableProbe({"t:0": per_second(T0, 1200), "t:1": per_second(T0 + 3600 * SECOND, 1200)})
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    starts, latest = {"t:0": 0, "t:1": 0}, {"t:0": 1200, "t:1": 1200}
    # both are read to their end and may receive more: the frontier is t:0's last record; t:1 waits
    assert aligner.clip(starts, dict(latest), latest) == {"t:0": 1200, "t:1": 0}
    # a read limit that leaves t:0 unread records: its next unread record is the frontier
    assert aligner.clip(starts, {"t:0": 600, "t:1": 600}, latest) == {"t:0": 600, "t:1": 0}


def test_partitions_are_cut_at_the_delay_past_the_frontier():
    probe = TableProbe(
        {"t:0": per_second(T0, 100), "t:1": per_second(T0 + 30 * SECOND, 100), "t:2": per_second(T0 + 50 * SECOND, 100)}
    )
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    starts, latest = {"t:0": 0, "t:1": 0, "t:2": 0}, {"t:0": 100, "t:1": 100, "t:2": 100}
    ends = aligner.clip(starts, dict(latest), latest)
    # the frontier is t:0's last record (T0 + 99 s): everything up to T0 + 109 s is read
    assert ends == {"t:0": 100, "t:1": 80, "t:2": 60}
    for key, end in ends.items():  # the cut is exact: the last record read is within the bound, the next is not
        assert end == sum(1 for t in probe.table[key] if t <= T0 + 109 * SECOND)


def test_partitions_in_step_are_read_whole_and_a_finished_run_needs_no_probe():
    probe = TableProbe({"t:0": per_second(T0, 1000), "t:1": per_second(T0, 1000)})
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    starts, latest = {"t:0": 0, "t:1": 0}, {"t:0": 1000, "t:1": 1000}
    assert aligner.clip(starts, dict(latest), latest) == latest
    asked = probe.asked
    assert aligner.clip(starts, dict(latest), latest, finished=True) == latest
    assert probe.asked == asked  # nothing can arrive late: no probe


def test_when_the_read_limit_leaves_the_slowest_nothing_it_alone_moves():
    probe = TableProbe({"t:0": per_second(T0, 1000), "t:1": per_second(T0 + 3600 * SECOND, 5000)})
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    starts, latest = {"t:0": 0, "t:1": 0}, {"t:0": 1000, "t:1": 5000}
    # the limit (300) gave all of its budget to the bigger backlog, which is an hour ahead
    assert aligner.clip(starts, {"t:0": 0, "t:1": 300}, latest) == {"t:0": 300, "t:1": 0}


def test_a_caught_up_partition_holds_others_back_until_it_is_idle():
    clock = [0.0]
    probe = TableProbe({"t:0": per_second(T0, 10), "t:1": per_second(T0 + 600 * SECOND, 100)})
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t", clock=lambda: clock[0])
    latest = {"t:0": 10, "t:1": 100}
    starts = {"t:0": 10, "t:1": 0}  # t:0 read to its end, its last record 10 minutes behind t:1
    assert aligner.clip(starts, dict(latest), latest) == {"t:0": 10, "t:1": 0}
    clock[0] = 29.0
    assert aligner.clip(starts, dict(latest), latest) == {"t:0": 10, "t:1": 0}
    clock[0] = 31.0  # nothing new on t:0 for 30 s: idle, it holds nobody back
    assert aligner.clip(starts, dict(latest), latest) == {"t:0": 10, "t:1": 100}
    # an --available-now run: a partition at its target is finished, idle at once
    fresh = EventTimeAligner(TableProbe(probe.table), delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    assert fresh.clip(starts, dict(latest), latest, finished=True) == {"t:0": 10, "t:1": 100}


def test_nothing_to_align_with_costs_no_probe():
    probe = TableProbe({"t:0": per_second(T0, 10), "t:1": per_second(T0, 10)})
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    assert aligner.clip({"t:0": 10, "t:1": 10}, {"t:0": 10, "t:1": 10}, {"t:0": 10, "t:1": 10}) == {
        "t:0": 10,
        "t:1": 10,
    }
    assert probe.asked == 0


def test_undecodable_records_hold_nothing_back():
    probe = TableProbe({"t:0": [None] * 10, "t:1": per_second(T0 + 3600 * SECOND, 10)})
    aligner = EventTimeAligner(probe, delay_ms=10_000, idle_timeout_ms=30_000, table="t")
    latest = {"t:0": 10, "t:1": 10}
    assert aligner.clip({"t:0": 0, "t:1": 0}, dict(latest), latest) == latest


# -- jobs ------------------------------------------------------------------------------------------------------


def _statuses(start: dt.datetime, count: int, status: str, step: float = 1.0, first: int = 0) -> list[bytes]:
    out = []
    for i in range(count):
        m = Booking(order_number=f"order-{first + i}", status=status, service_area_id="a")
        m.event_timestamp.FromDatetime(start + dt.timedelta(seconds=i * step))
        out.append(m.SerializeToString())
    return out


def _window_counts(broker, stencil, spark, tmp_path, source: str, sql: str, expected: int, **extra):
    out = f"counts-{uuid.uuid4().hex[:8]}"
    broker.create_topic(out, 1)
    data = job(
        stencil,
        [kafka_stream(broker, source)],
        sql,
        **kafka_sink(broker, out, "dagger.examples.BookingCountMessage"),
        **extra,
    )
    manager, query = run_job(spark, data, tmp_path / f"cp-{out}")
    assert query.exception() is None
    rows = [Count.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=expected)]
    late = sum(
        op.get("numRowsDroppedByWatermark", 0) for p in query.recentProgress for op in p.get("stateOperators", [])
    )
    from dagger.progress import ProgressReporter
    from dagger.telemetry.metrics import JobMetrics

    metrics = JobMetrics(manager)  # as the runner's listener records them: each batch once
    for progress in query.recentProgress:
        metrics.record_progress(progress)
    reporter = ProgressReporter(metrics)
    reporter.report(query, final=True)  # the final summary a user reads
    assert reporter.late_rows == late
    return sorted((r.window_timestamp.ToDatetime(dt.UTC), r.booking_count) for r in rows), late


COUNT_SQL = (
    "SELECT service_area_id, count(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp "
    "FROM data_stream_0 WHERE {where} GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)"
)


def _skewed(broker, topic) -> tuple[str, list[dt.datetime]]:
    """Two partitions an hour apart in event time, 20 minutes of bookings each (a backlog of 2,400 records)."""
    source = topic("skewed", partitions=2)
    slow = _statuses(START, 1200, "CREATED")
    fast = _statuses(START + dt.timedelta(hours=1), 1200, "CREATED", first=1200)
    produce(broker.bootstrap, source, ((None, v) for pair in zip(slow, fast, strict=True) for v in pair), partitions=2)
    times = [START + dt.timedelta(seconds=i) for i in range(1200)]
    times += [START + dt.timedelta(hours=1, seconds=i) for i in range(1200)]
    return source, times


def _expected_minutes(times: list[dt.datetime], delay: dt.timedelta) -> list[tuple[dt.datetime, int]]:
    watermark = max(times) - delay
    counts = collections.Counter(t.replace(second=0) + dt.timedelta(minutes=1) for t in times)
    return sorted((end, n) for end, n in counts.items() if end <= watermark)


from dagger.plugins.transformer import Transformer  # noqa: E402


class CompletedOnly(Transformer):
    """A team's own pre-processor: keeps completed bookings with a plain DataFrame filter."""

    name = "CompletedOnly"

    def transform(self, df):  # noqa: ANN001, ANN201
        return df.where("status = 'COMPLETED'")


PRE_FILTER = {
    "table_transformers": [
        {
            "table_name": "data_stream_0",
            "transformers": [{"transformation_class": "tests.unit.kafka.source.test_event_time:CompletedOnly"}],
        }
    ]
}
JOINED = (
    "SELECT a.service_area_id, count(1) AS booking_count, TUMBLE_END(a.rowtime, INTERVAL '1' MINUTE) AS "
    "window_timestamp FROM data_stream_0 a JOIN data_stream_1 b ON a.order_number = b.order_number AND "
    "b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '1' SECOND WHERE a.status = 'COMPLETED' "
    "GROUP BY a.service_area_id, TUMBLE(a.rowtime, INTERVAL '1' MINUTE)"
)
