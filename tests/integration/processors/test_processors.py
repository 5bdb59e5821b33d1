"""Pre- and post-processors: internal sources, the output-row model and every transformer, in real jobs over
the broker (JSON output through the Kafka sink)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import struct
import time

import pytest

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
from dagger.runner import is_drained
from testing.produce import consume_all, produce
from testing.samples import bookings
from tests.conftest import (
    BASE_SQL,
    STAR,
    START,
    job,
    json_sink,
    kafka_stream,
    run_job,
    run_processed,
)

pytestmark = pytest.mark.integration


class UpperArguments(TransformerArguments):
    column: str


class UpperTransformer(Transformer):
    """A user transformer registered by name (the contract's example)."""

    name = "UpperTransformer"

    def transform(self, df):
        from pyspark.sql import functions as F

        column = self.column(self.settings.column, "column")
        return df.withColumn(column, F.upper(column))


register_transformer("UpperTransformer", UpperArguments, UpperTransformer)


def test_internal_sources_build_the_output_row_and_drop_everything_else(spark, broker, stencil, topic, tmp_path):
    post = {
        "internal_source": [
            {"output_field": "order", "type": "sql", "value": "order_number"},
            {"output_field": "source", "type": "constant", "value": "dagger"},
            {"output_field": "processed_at", "type": "function", "value": "CURRENT_TIMESTAMP"},
            {
                "output_field": "payload",
                "type": "function",
                "value": "JSON_PAYLOAD",
                "internal_processor_config": {"schema_proto_class": "dagger.examples.BookingLogKey"},
            },
            {"output_field": "booking", "type": "sql", "value": "*"},
        ]
    }
    before = dt.datetime.now(dt.UTC)
    _, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=post, count=6)
    by_order = {r["order"]: r for r in rows}
    assert set(by_order) == {f"order-{i}" for i in range(6)}
    row = by_order["order-4"]
    assert set(row) == {"order", "source", "processed_at", "payload", "booking"}  # customer_id etc. are gone
    assert row["source"] == "dagger"
    assert json.loads(row["payload"]) == {"order_number": "order-4", "service_area_id": "bandung"}
    assert row["booking"]["customer_id"] == "c4" and row["booking"]["pickup"]["name"] == "pickup-0"
    assert dt.datetime.fromisoformat(row["processed_at"].replace("Z", "+00:00")) >= before.replace(microsecond=0)


def test_star_passes_every_column_then_transformers_run_in_order(spark, broker, stencil, topic, tmp_path):
    post = {
        "internal_source": [{"output_field": "tag", "type": "constant", "value": "x"}, STAR],
        "transformers": [
            {
                "transformation_class": "org.raystack.dagger.functions.transformers.HashTransformer",
                "transformation_arguments": {"maskColumns": ["customer_id", "amount_paid_by_cash", "pickup.name"]},
            },
            {
                "transformation_class": "ClearColumnTransformer",
                "transformation_arguments": {"targetColumnName": "driver_id"},
            },
            {"transformation_class": "UpperTransformer", "transformation_arguments": {"column": "tag"}},
        ],
    }
    _, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=post, count=4)
    row = next(r for r in rows if r["order_number"] == "order-3")
    assert list(row)[:2] == ["tag", "order_number"]  # named sources first, then every SQL column
    assert row["tag"] == "X"
    assert row["customer_id"] == hashlib.sha256(b"c3").hexdigest()
    cash = struct.unpack("<q", hashlib.sha256(struct.pack("<q", 30)).digest()[:8])[0]
    assert row["amount_paid_by_cash"] == cash  # Guava's hashLong(v).asLong()
    assert row["pickup"]["name"] == hashlib.sha256(b"pickup-3").hexdigest()
    assert row["pickup"]["longitude"] == pytest.approx(106.8)  # the rest of the struct is kept
    assert row["driver_id"] == ""
    assert row["service_area_id"] == "jakarta"


def test_feature_transformers_build_feast_rows(spark, broker, stencil, topic, tmp_path):
    post = {
        "internal_source": [STAR, {"output_field": "features", "type": "constant", "value": ""}],
        "transformers": [
            {
                "transformation_class": "FeatureTransformer",
                "transformation_arguments": {"keyColumnName": "customer_id", "valueColumnName": "amount_paid_by_cash"},
            },
            {
                "transformation_class": "FeatureWithTypeTransformer",
                "transformation_arguments": {
                    "outputColumnName": "features",
                    "data": [
                        {"keyColumnName": "service_area_id", "valueColumnName": "order_number", "type": "StringType"}
                    ],
                },
            },
        ],
    }
    _, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=post, count=3)
    row = next(r for r in rows if r["order_number"] == "order-2")
    [feature] = row["amount_paid_by_cash"]
    assert feature["name"] == "c2" and feature["value"]["int64_val"] == 20
    [typed] = row["features"]
    assert typed["name"] == "surabaya" and typed["value"]["string_val"] == "order-2"


def test_sql_transformer_aggregates_post_processed_rows_with_library_functions(spark, broker, stencil, topic, tmp_path):
    post = {
        "internal_source": [STAR, {"output_field": "channel", "type": "constant", "value": "app"}],
        "transformers": [
            {
                "transformation_class": "SQLTransformer",
                "transformation_arguments": {
                    "sqlQuery": "SELECT channel, COUNT(1) AS bookings, DistinctCount(customer_id) AS customers, "
                    "TUMBLE_END(rowtime, INTERVAL '10' MINUTE) AS window_end FROM data_stream "
                    "GROUP BY channel, TUMBLE(rowtime, INTERVAL '10' MINUTE)",
                    "allowedLatenessInMs": "1000",
                },
            }
        ],
    }
    _, rows = run_processed(spark, broker, stencil, topic, tmp_path, post=post, count=30, expected=3)
    assert sorted((r["window_end"], r["bookings"], r["customers"]) for r in rows) == [
        ("2026-11-22T10:10:00.000000Z", 10, 5),
        ("2026-11-22T10:20:00.000000Z", 10, 5),
        ("2026-11-22T10:30:00.000000Z", 10, 5),
    ]


def test_invalid_record_filter_drops_and_counts_what_the_source_could_not_decode(
    spark, broker, stencil, topic, tmp_path
):
    source, out = topic("irf-src"), topic("irf-out")
    values = bookings(6, START)
    values.insert(2, b"\xff\xff not a booking")
    produce(broker.bootstrap, source, ((None, v) for v in values))
    pre = {
        "table_transformers": [
            {
                "table_name": "data_stream_0",
                "transformers": [
                    {"transformation_class": "io.odpf.dagger.functions.transformers.InvalidRecordFilterTransformer"}
                ],
            }
        ]
    }
    data = job(
        stencil,
        [kafka_stream(broker, source)],  # no explicit invalid-record policy: Dagger's behaviour
        "SELECT order_number FROM data_stream_0",
        PROCESSOR_PREPROCESSOR_ENABLE="true",
        PROCESSOR_PREPROCESSOR_CONFIG=json.dumps(pre),
        **json_sink(broker, out),
    )
    _, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    assert sorted(json.loads(m.value())["order_number"] for m in consume_all(broker.bootstrap, out, expected=6)) == [
        f"order-{i}" for i in range(6)
    ]
    metrics = [p["observedMetrics"] for p in query.recentProgress if p["observedMetrics"]]
    assert sum(m["filtered_invalid_records_data_stream_0"]["count"] for m in metrics) == 1


def _pre(transformer: str, **arguments) -> dict:
    """A pre-processor config running one transformer on data_stream_0."""
    spec = {"transformation_class": transformer, "transformation_arguments": arguments}
    return {"table_transformers": [{"table_name": "data_stream_0", "transformers": [spec]}]}


def _dedup_job(stencil, broker, source, out, ttl: int) -> dict:
    pre = _pre("DeDuplicationTransformer", key_column="customer_id", ttl_in_seconds=ttl)
    return job(
        stencil,
        [kafka_stream(broker, source)],
        "SELECT order_number, customer_id FROM data_stream_0",
        PROCESSOR_PREPROCESSOR_ENABLE="true",
        PROCESSOR_PREPROCESSOR_CONFIG=json.dumps(pre),
        **json_sink(broker, out),
    )


def _run_until_drained(spark, data: dict, checkpoint):
    """An available-now run stopped once drained (a state TTL keeps Spark running batches)."""
    from dagger.job import Job

    manager = Job(load_config(data=data), checkpoint_dir=str(checkpoint), available_now=True, spark=spark)
    query = manager.start()
    deadline = time.monotonic() + 180
    while query.isActive and not is_drained(query) and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    return query


def test_deduplication_passes_the_first_row_per_key_until_its_ttl_expires(spark, broker, stencil, topic, tmp_path):
    source, out = topic("dedup-src"), topic("dedup-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(20, START)))  # customers c0..c4, four each
    ttl = 20
    data = _dedup_job(stencil, broker, source, out, ttl=ttl)
    query = _run_until_drained(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    first = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=5, idle_seconds=1)]
    assert sorted(r["order_number"] for r in first) == [f"order-{i}" for i in range(5)]  # the first row per key

    # the TTL counts from the micro-batch that stored the key: wait it out, then the same keys pass again
    stored = _batch_time(query.recentProgress[0])
    time.sleep(max(0.0, stored + ttl + 1 - time.time()))
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    query = _run_until_drained(spark, data, tmp_path / "cp")
    assert query.exception() is None
    assert len(consume_all(broker.bootstrap, out, expected=10, idle_seconds=1)) == 10

    # ... and are dropped again while their new state lives
    stored = _batch_time(next(p for p in query.recentProgress if p["numInputRows"]))
    produce(broker.bootstrap, source, ((None, v) for v in bookings(5, START)))
    query = _run_until_drained(spark, data, tmp_path / "cp")
    assert query.exception() is None
    batch = _batch_time(next(p for p in query.recentProgress if p["numInputRows"]))
    assert batch - stored < ttl, f"the third run started {batch - stored:.0f} s after the second: outside the TTL"
    assert len(consume_all(broker.bootstrap, out, expected=10, idle_seconds=2)) == 10


def _batch_time(progress: dict) -> float:
    return dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def test_deduplication_in_a_bounded_job_keeps_the_earliest_row_per_key(spark, broker, stencil, topic, tmp_path):
    pre = _pre("DeDuplicationTransformer", key_column="customer_id", ttl_in_seconds="60")
    _, rows = run_processed(
        spark,
        broker,
        stencil,
        topic,
        tmp_path,
        sql="SELECT order_number, customer_id FROM data_stream_0",
        pre=pre,
        count=20,
        expected=5,
    )
    assert sorted(r["order_number"] for r in rows) == [f"order-{i}" for i in range(5)]


def _planned(spark, broker, stencil, post=None, pre=None):
    from dagger.job import Job

    extra = {}
    if post is not None:
        extra.update(PROCESSOR_POSTPROCESSOR_ENABLE="true", PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post))
    if pre is not None:
        extra.update(PROCESSOR_PREPROCESSOR_ENABLE="true", PROCESSOR_PREPROCESSOR_CONFIG=json.dumps(pre))
    config = load_config(data=job(stencil, [kafka_stream(broker, "cfg-never-created")], BASE_SQL, **extra))
    return Job(config, spark=spark).validate()


def _post(*transformers, sources=(STAR,)) -> dict:
    return {"internal_source": list(sources), "transformers": list(transformers)}


def _pre_of(table: str, *transformers) -> dict:
    return {"table_transformers": [{"table_name": table, "transformers": list(transformers)}]}


def _t(name: str, **arguments) -> dict:
    return (
        {"transformation_class": name, "transformation_arguments": arguments}
        if arguments
        else {"transformation_class": name}
    )


CONFIG_ERRORS = [
    (
        "transformers without sources",
        {"post": {"transformers": [_t("ClearColumnTransformer", targetColumnName="driver_id")]}},
        "transformers without an internal or external source would produce empty rows",
    ),
    (
        "unknown transformer",
        {"post": _post(_t("Nope"))},
        r"transformers\[0\].transformation_class: unknown transformation_class 'Nope'; accepted: .*HashTransformer",
    ),
    (
        "missing argument",
        {"post": _post(_t("ClearColumnTransformer"))},
        "ClearColumnTransformer needs transformation_arguments.targetColumnName",
    ),
    (
        "unknown column",
        {"post": _post(_t("ClearColumnTransformer", targetColumnName="nothing"))},
        "names column 'nothing', which is not in the rows",
    ),
    (
        "unhashable type",
        {"post": _post(_t("HashTransformer", maskColumns=["pickup.latitude"]))},
        r"cannot hash 'pickup.latitude' of type double; accepted: STRING, INT, BIGINT",
    ),
    (
        "internal source of a missing column",
        {"post": {"internal_source": [{"output_field": "x", "type": "sql", "value": "missing"}]}},
        r"internal_source\[0\]: value 'missing' is not a column of the SQL output",
    ),
    (
        "unknown function",
        {"post": {"internal_source": [{"output_field": "x", "type": "function", "value": "NOW"}]}},
        "function 'NOW' is not available; accepted: CURRENT_TIMESTAMP, JSON_PAYLOAD",
    ),
    (
        "JSON_PAYLOAD without a proto",
        {"post": {"internal_source": [{"output_field": "x", "type": "function", "value": "JSON_PAYLOAD"}]}},
        "JSON_PAYLOAD needs internal_processor_config.schema_proto_class",
    ),
    (
        "pre-processor of an unknown table",
        {"pre": _pre_of("other", _t("InvalidRecordFilterTransformer"))},
        r"table_transformers\[0\].table_name 'other' is not a stream; streams: data_stream_0",
    ),
    (
        "post-only transformer as a pre-processor",
        {"pre": _pre_of("data_stream_0", _t("HashTransformer", maskColumns=["customer_id"]))},
        "HashTransformer runs only as a post-processor",
    ),
    (
        "argument of the wrong type",
        {
            "pre": _pre_of(
                "data_stream_0", _t("DeDuplicationTransformer", key_column="customer_id", ttl_in_seconds="soon")
            )
        },
        "ttl_in_seconds must be int, got str 'soon'",
    ),
]


@pytest.mark.parametrize("configs, message", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_processor_configs_are_checked_before_anything_runs(spark, broker, stencil, configs, message):
    with pytest.raises(DaggerConfigError, match=message):
        _planned(spark, broker, stencil, **configs)


def test_a_users_transformer_named_by_module_path_runs(spark, broker, stencil):
    planned = _planned(
        spark,
        broker,
        stencil,
        post=_post(_t("tests.integration.processors.test_processors:UpperTransformer", column="customer_id")),
    )
    assert "customer_id" in planned.output_schema.names
    analyzed = planned.dataframe._jdf.queryExecution().analyzed().toString()
    assert "upper(customer_id" in analyzed  # the transformer's own expression is in the plan
