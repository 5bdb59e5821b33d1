"""``dagger validate`` without Spark (:mod:`dagger.job.static_plan`): for every query shape it accepts, the plan it
reads from the descriptors and the SQL is Spark's own (output columns and types, output mode, the sink's
problems, the notes); every other shape is handed to Spark with its reason."""

from __future__ import annotations

import json

import pytest

from dagger.job import Job, load_config
from tests.conftest import job, kafka_sink, kafka_stream, validate_here

pytestmark = pytest.mark.integration

RUNNING = (
    "SELECT customer_id, COUNT(1) AS bookings, SUM(amount_paid_by_cash) AS cash, AVG(total_distance_in_kms) AS km, "
    "MAX(rowtime) AS last_at, MIN(order_number) AS first_order FROM data_stream_0 GROUP BY customer_id"
)

#: queries the static plan reads, each compared with Spark's analysis
READ_WITHOUT_SPARK = [
    # the quickstart: a tumbling window
    "SELECT service_area_id, count(1) AS booking_count, sum(total_distance_in_kms) AS total_distance_in_kms, "
    "TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp FROM `data_stream_0` "
    "GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '1' MINUTE)",
    # projections, a filter, arithmetic, casts, nested fields, built-in functions
    "SELECT order_number, amount_paid_by_cash * 2 + 1 AS doubled, amount_paid_by_cash / 4 AS quarter, "
    "CAST(amount_paid_by_cash AS INT) AS small, upper(customer_id) AS shout, driver_pickup_location.name AS pickup, "
    "driver_pickup_location.latitude + 1 AS lat, CASE WHEN total_distance_in_kms > 3 THEN 'far' ELSE 'near' END AS "
    "how_far, coalesce(driver_id, 'none') AS driver, concat(order_number, '-', customer_id) AS ids, "
    "length(order_number) AS n, service_type, item_tags, rowtime FROM data_stream_0 WHERE service_area_id = 'jakarta'",
    # an aggregation without a window (and without idle-key retention, below): update
    RUNNING,
    # the window's start, a HAVING
    "SELECT TUMBLE_START(rowtime, INTERVAL '10' MINUTE) AS window_start, COUNT(*) AS n FROM data_stream_0 "
    "GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTE) HAVING COUNT(*) > 1",
    "SELECT * FROM data_stream_0",
]

#: queries it hands to Spark, with the reason it gives
NEEDS_SPARK = [
    ("SELECT a.order_number FROM data_stream_0 a JOIN data_stream_0 b ON a.order_number = b.order_number", "a join"),
    ("SELECT nope FROM data_stream_0", "sqlglot could not resolve it (Column 'nope' could not be resolved"),
    ("SELECT metadata['parity'] AS parity FROM data_stream_0", "the type of output column parity"),
    ("SELECT DISTINCT customer_id FROM data_stream_0", "DISTINCT"),
    (RUNNING, "idle-key retention of a running aggregation"),  # FLINK_RETENTION_IDLE_STATE_MINUTE's default
]


def _plans(spark, stencil, broker, sql: str, **keys):
    data = job(stencil, [kafka_stream(broker, "never-created")], sql, **keys)
    static, why = Job(load_config(data=data), spark=spark, validating=True).plan_without_spark()
    full = Job(load_config(data=data), spark=spark, validating=True).validate()
    return static, why, full


def _shape(plan) -> dict:
    return {
        "columns": [(f.name, f.dataType.simpleString()) for f in plan.output_schema.fields],
        "mode": plan.output_mode,
        "sql": plan.rewritten_sql,
        "notes": plan.notes,
        "state": plan.unbounded_state,
        "problems": plan.problems,
        "tables": {t: s.simpleString() for t, s in plan.tables.items()},
    }


@pytest.mark.parametrize("sql", READ_WITHOUT_SPARK)
def test_the_plan_read_without_spark_is_sparks_own(spark, stencil, broker, sql):
    static, why, full = _plans(spark, stencil, broker, sql, FLINK_RETENTION_IDLE_STATE_MINUTE="0")
    assert static is not None, why
    assert _shape(static) == _shape(full)


def test_the_sinks_problems_read_without_spark_are_sparks_own(spark, stencil, broker):
    # a summary message whose pickup (a Location) cannot take a string, and whose order_number takes a cast bigint
    sql = "SELECT CAST(amount_paid_by_cash AS STRING) AS order_number, order_number AS pickup, item_tags FROM data_stream_0"
    sink = kafka_sink(broker, "out", "dagger.examples.BookingSummaryMessage")
    static, why, full = _plans(spark, stencil, broker, sql, **sink)
    assert static is not None, why
    assert static.problems and _shape(static) == _shape(full)


@pytest.mark.parametrize(("sql", "reason"), NEEDS_SPARK)
def test_other_queries_go_to_spark_with_the_reason(spark, stencil, broker, sql, reason):
    data = job(stencil, [kafka_stream(broker, "never-created")], sql)
    static, why = Job(load_config(data=data), spark=spark, validating=True).plan_without_spark()
    assert static is None and why.startswith(reason), why


def test_validate_says_how_it_checked_and_full_asks_spark(spark, stencil, broker, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(stencil, [kafka_stream(broker, "bookings")], READ_WITHOUT_SPARK[0])))
    fast, full = validate_here(spark, str(path)), validate_here(spark, "--full", str(path))
    assert fast.returncode == full.returncode == 0, fast.stderr + full.stderr
    assert "checked without Spark: read from the descriptors and the SQL (--full runs Spark's analysis)" in fast.stdout
    assert "checked by Spark's analysis (--full)" in full.stdout
    same = [line for line in fast.stdout.splitlines() if not line.startswith("checked ")]
    assert same == [line for line in full.stdout.splitlines() if not line.startswith("checked ")]
    assert "Using Spark's" not in fast.stderr and "SparkContext" not in fast.stderr  # no JVM was started
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(job(stencil, [kafka_stream(broker, "bookings")], "SELECT nope FROM data_stream_0")))
    refused = validate_here(spark, str(bad))
    assert refused.returncode == 2
    assert "`nope` cannot be resolved" in refused.stderr  # Spark's own words, as before


def test_a_given_output_mode_is_taken_as_spark_takes_it(spark, stencil, broker):
    static, why, full = _plans(
        spark, stencil, broker, "SELECT order_number FROM data_stream_0", SPARK_OUTPUT_MODE="update"
    )
    assert static is not None, why
    assert static.output_mode == full.output_mode == "update"
