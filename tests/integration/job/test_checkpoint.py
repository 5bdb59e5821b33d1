"""The job's own files under its checkpoint behave the same on a local disk and on a remote store (S3, moto).

Before the checkpoint store, the bounded-run registry turned ``gs://bucket/ck`` into a local relative path, the
descriptor pin skipped remote checkpoints, and the BigQuery sink's markers went through pyarrow on their own: a
bounded BigQuery job with a remote checkpoint, started again from a new working directory (a new container),
restarted its batch ids at 0, found the earlier run's remote markers and discarded its new rows as written.
"""

from __future__ import annotations

import os
import uuid

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from dagger.bounded import batch_id_for, record_run
from dagger.checkpoint import CheckpointStore
from dagger.errors import SchemaCompatibilityError
from dagger.schema.compat import check_and_record, snapshot

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "ck")
    return request.getfixturevalue("s3")("unit")


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """Run from a fresh working directory, as a new container does."""

    def move() -> None:
        fresh = tmp_path / f"cwd-{uuid.uuid4().hex[:6]}"
        fresh.mkdir()
        monkeypatch.chdir(fresh)

    return move


def test_files_are_written_atomically_and_read_back(location):
    store = CheckpointStore(location)
    assert store.read_json("dagger/schema.json") is None
    store.write_json("dagger/schema.json", {"a": 1})
    store.write_json("dagger/schema.json", {"a": 2})
    assert store.read_json("dagger/schema.json") == {"a": 2}
    filesystem, path = store._path("dagger")
    from pyarrow import fs

    names = [info.base_name for info in filesystem.get_file_info(fs.FileSelector(path))]
    assert names == ["schema.json"]  # no temporary file left behind
    store.delete("dagger/schema.json")
    store.delete("dagger/schema.json")  # deleting what is gone is fine
    assert store.read_json("dagger/schema.json") is None
    child = CheckpointStore(store.at("sinks/bq"))
    child.write_json("batch-0.json", {"streams": ["s"]})
    assert CheckpointStore(store.at("sinks/bq")).read_json("batch-0.json") == {"streams": ["s"]}


def test_the_bounded_run_registry_survives_a_new_working_directory(location, elsewhere):
    elsewhere()
    store = CheckpointStore(location)
    assert batch_id_for(store, "input-a") == 0
    record_run(store, "input-a", 0)
    elsewhere()
    store = CheckpointStore(location)
    assert batch_id_for(store, "input-a") == 0  # the same input: the same batch
    assert batch_id_for(store, "input-b") == 1  # new input: the next one
    if not location.startswith("s3://"):
        assert os.path.isabs(CheckpointStore("relative/ck")._path("x")[1])


def test_the_descriptor_pin_is_checked_on_every_store(location, elsewhere):
    schema = StructType([StructField("service_area_id", StringType()), StructField("amount", LongType())])
    store = CheckpointStore(location)
    check_and_record(store, snapshot("a" * 64, {"bookings": schema}), {"service_area_id"})
    elsewhere()
    retyped = StructType([StructField("service_area_id", LongType()), StructField("amount", LongType())])
    with pytest.raises(SchemaCompatibilityError, match="service_area_id.*string to bigint"):
        check_and_record(CheckpointStore(location), snapshot("b" * 64, {"bookings": retyped}), {"service_area_id"})


@pytest.mark.parametrize("endpoint", ["url", "spark_conf"])
def test_a_bounded_bigquery_job_with_a_remote_checkpoint_writes_new_input_from_a_new_container(
    spark, broker, stencil, bigquery, topic, s3, elsewhere, endpoint
):
    """The S3 endpoint in the location's URL, or only in Spark's ``fs.s3a.endpoint`` (the sink's markers once
    went elsewhere then: the marker store was rebuilt from the bare path)."""
    from testing.produce import produce
    from testing.samples import bookings
    from tests.conftest import START, bigquery_count, bigquery_keys, bigquery_table, job, kafka_stream, run_job

    source, table, checkpoint = topic("remote-ck"), bigquery_table(), s3("bounded")
    conf = {}
    if endpoint == "spark_conf":
        checkpoint = checkpoint.split("?")[0]
        conf = {"SPARK_CONF": {"spark.hadoop.fs.s3a.endpoint": f"http://{s3.endpoint}"}}
    produce(broker.bootstrap, source, ((None, v) for v in bookings(40, START)))
    sql = "SELECT order_number, customer_id FROM data_stream_0"

    def run(first: int, last: int) -> None:
        stream = kafka_stream(
            broker,
            source,
            SOURCE_KAFKA_STARTING_OFFSETS=f'{{"{source}": {{"0": {first}}}}}',
            SOURCE_KAFKA_ENDING_OFFSETS=f'{{"{source}": {{"0": {last}}}}}',
        )
        data = job(
            stencil, [stream], sql, **conf, **bigquery_keys(bigquery, table, "dagger.examples.BookingSummaryMessage")
        )
        manager, query = run_job(spark, data, checkpoint)
        assert manager.bounded and query.exception() is None, str(query.exception())[:3000]

    elsewhere()
    run(0, 20)
    assert bigquery_count(bigquery, table) == 20
    elsewhere()  # a new container: nothing local survives
    run(20, 40)
    assert bigquery_count(bigquery, table) == 40  # new input, a new batch id: written
    elsewhere()
    run(0, 20)
    assert bigquery_count(bigquery, table) == 40  # the first input again: its batch, committed once
    markers = CheckpointStore(checkpoint, f"http://{s3.endpoint}").below("sinks/bigquery")
    assert markers.read_json("batch-0.json") is not None  # the markers are in the checkpoint's own store
