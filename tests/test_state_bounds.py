"""Idle-state retention: Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE idle minutes; Spark
cannot, so every operator whose state grows forever is named, with how to bound it, by `dagger validate` and at
start."""

from __future__ import annotations

import json

import pytest

from dagger.sql.state import unbounded_state
from tests.conftest import dagger, job, kafka_stream


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT customer_id, COUNT(1) FROM s GROUP BY customer_id", ["GROUP BY customer_id keeps a running result"]),
        ("SELECT a, COUNT(1) FROM s GROUP BY a, window(rowtime, '1 minute')", []),
        ("SELECT a, COUNT(1) FROM s GROUP BY a, session_window(rowtime, '1 minute')", []),
        ("SELECT DISTINCT a FROM s", ["SELECT DISTINCT keeps every distinct row forever"]),
        ("SELECT b.x FROM b JOIN c ON b.k = c.k", ["the join with c keeps every row of both sides forever"]),
        (
            "SELECT b.x FROM b JOIN c ON b.k = c.k AND b.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL '5' MINUTE",
            [],
        ),
        ("SELECT b.x FROM b JOIN c ON b.k = c.k AND b.rowtime >= c.rowtime", []),
        ("SELECT x FROM s WHERE y > 1", []),
        ("SELECT x FROM s LATERAL VIEW explode(tags) t AS tag", []),
    ],
)
def test_operators_whose_state_grows_forever_are_named(sql, expected):
    found = unbounded_state(sql)
    assert len(found) == len(expected)
    for sentence, start in zip(found, expected, strict=True):
        assert sentence.startswith(start)


def test_validate_and_the_start_log_name_unbounded_state_with_daggers_retention(broker, stencil, tmp_path):
    sql = "SELECT customer_id, COUNT(1) AS booking_count FROM data_stream_0 GROUP BY customer_id"
    path = tmp_path / "job.json"
    path.write_text(
        json.dumps(job(stencil, [kafka_stream(broker, "nothing-yet")], sql, FLINK_RETENTION_IDLE_STATE_MINUTE="30"))
    )
    done = dagger("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert (
        "state without bound (Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE=30 idle minutes; "
        "Spark has no such retention and keeps it):\n  - GROUP BY customer_id keeps a running result for every key "
        "forever (no window)"
    ) in done.stdout
    windowed = job(
        stencil,
        [kafka_stream(broker, "nothing-yet")],
        "SELECT customer_id, COUNT(1) AS n FROM data_stream_0 GROUP BY customer_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)",
    )
    path.write_text(json.dumps(windowed))
    done = dagger("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert "state without bound" not in done.stdout


@pytest.mark.integration
def test_a_job_with_unbounded_state_says_so_when_it_starts(spark, broker, stencil, topic, tmp_path, caplog):
    from dagger.devtools.produce import produce
    from dagger.devtools.samples import bookings
    from tests.conftest import START, run_job

    source = topic("unbounded")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    sql = "SELECT customer_id, COUNT(1) AS n FROM data_stream_0 GROUP BY customer_id"
    with caplog.at_level("WARNING", logger="dagger"):
        _, query = run_job(spark, job(stencil, [kafka_stream(broker, source)], sql), tmp_path / "cp")
    assert query.exception() is None
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("state without bound")]
    assert warnings == [
        "state without bound: GROUP BY customer_id keeps a running result for every key forever (no window): group "
        "by a TUMBLE or HOP window as well to have the watermark drop old keys (Dagger drops a key's state after "
        "FLINK_RETENTION_IDLE_STATE_MINUTE=10 idle minutes; Spark has no such retention and keeps it)"
    ]
