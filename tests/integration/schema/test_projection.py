"""The tests of tests/unit/schema/test_projection.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

from dagger.job.inputs import pruned_fields
from tests.conftest import job, kafka_stream
from tests.unit.schema.test_projection import _manager


def test_a_planned_job_reports_the_full_table_but_reads_the_pruned_one(spark, stencil, broker, topic):
    from dagger.job import Job, load_config

    sql = "SELECT order_number, amount_paid_by_cash FROM data_stream_0 WHERE amount_paid_by_cash > 1"
    manager = Job(load_config(data=job(stencil, [kafka_stream(broker, topic("p"))], sql)), spark=spark)
    plan = manager.validate()
    assert len(plan.tables["data_stream_0"].fields) == 15  # what `dagger plan` and checkpoint checks see
    relation = spark.table("data_stream_0")
    assert relation.columns == [
        "order_number",
        "event_timestamp",
        "amount_paid_by_cash",
        "__internal_validation_field__",
        "rowtime",
    ]


def test_pruning_is_off_for_star_queries_pre_processed_tables_and_when_disabled(stencil, broker):
    sql = "SELECT order_number FROM data_stream_0"
    assert pruned_fields(_manager(stencil, broker, sql).context, sql) == {
        "data_stream_0": ["order_number", "event_timestamp"]
    }
    star = "SELECT * FROM data_stream_0"
    assert pruned_fields(_manager(stencil, broker, star).context, star) == {}
    assert pruned_fields(_manager(stencil, broker, sql, SPARK_PRUNE_INPUT_COLUMNS="false").context, sql) == {}
    pre = {
        "table_transformers": [
            {
                "table_name": "data_stream_0",
                "transformers": [{"transformation_class": "InvalidRecordFilterTransformer"}],
            }
        ]
    }
    manager = _manager(stencil, broker, sql, PROCESSOR_PREPROCESSOR_ENABLE="true", PROCESSOR_PREPROCESSOR_CONFIG=pre)
    assert pruned_fields(manager.context, sql) == {}
