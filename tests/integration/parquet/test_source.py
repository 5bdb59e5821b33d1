"""PARQUET_SOURCE: generated datasets in the dt=/hr= layout, read by Spark's Parquet reader, mapped onto the
stream's proto schema; the same SQL over Parquet and over Kafka gives the same windows."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from dagger.errors import DaggerConfigError
from dagger.job import load_config
from testing.parquet_samples import partition_path, write_legacy, write_standard
from testing.produce import consume_all, produce
from testing.samples import AREAS, bookings, message_class
from tests.conftest import job, kafka_sink, kafka_stream, run_job

pytestmark = pytest.mark.integration

Booking = message_class("dagger.examples.BookingLogMessage")
Count = message_class("dagger.examples.BookingCountMessage")
T0 = dt.datetime(2026, 11, 22, 9, 0, tzinfo=dt.UTC)
WINDOW_SQL = (
    "SELECT service_area_id, COUNT(1) AS booking_count, TUMBLE_END(rowtime, INTERVAL '30' MINUTE) AS window_timestamp, "
    "SUM(total_distance_in_kms) AS total_distance_in_kms FROM data_stream_0 "
    "GROUP BY service_area_id, TUMBLE(rowtime, INTERVAL '30' MINUTE)"
)


def _messages(count: int = 180) -> list:
    return [Booking.FromString(b) for b in bookings(count, T0, step_seconds=60)]


@pytest.fixture(scope="module")
def dataset(spark, tmp_path_factory):
    """Three hours of bookings (one a minute): 09:00 pyarrow without driver_id, 10:00 parquet-mr legacy layout,
    11:00 pyarrow with an extra column. Written newest first, with names that sort against time."""
    root = tmp_path_factory.mktemp("bookings")
    messages = _messages()
    hours = [messages[0:60], messages[60:120], messages[120:180]]
    write_standard(
        partition_path(root, T0 + dt.timedelta(hours=2)) / "part-a.parquet",
        hours[2],
        extra={"ingested_by": ["loader"] * 60},
    )
    write_legacy(spark, partition_path(root, T0 + dt.timedelta(hours=1)) / "part-m.parquet", hours[1])
    write_standard(partition_path(root, T0) / "part-z.parquet", hours[0], leave_out=["driver_id"])
    (partition_path(root, T0) / "_SUCCESS").write_text("")
    (partition_path(root, T0) / ".in-progress.parquet").write_text("not parquet")
    return root, messages


def _parquet_stream(paths: list[str], **extra) -> dict:
    stream = {
        "INPUT_SCHEMA_TABLE": "data_stream_0",
        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
        "SOURCE_DETAILS": [{"SOURCE_NAME": "PARQUET_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
        "SOURCE_PARQUET_FILE_PATHS": paths,
    }
    stream.update(extra)
    return stream


def _frame(spark, stencil, stream: dict):
    from dagger.job import Job

    manager = Job(load_config(data=job(stencil, [stream], "SELECT * FROM data_stream_0")), spark=spark)
    from dagger.job.inputs import register_streams

    register_streams(manager.context)
    return spark.table("data_stream_0")


def test_rows_are_mapped_onto_the_proto_schema_from_both_layouts(spark, stencil, dataset):
    root, messages = dataset
    rows = {r.order_number: r for r in _frame(spark, stencil, _parquet_stream([str(root)])).collect()}
    assert len(rows) == 180
    for i in (5, 65, 125):  # one from each file
        m, row = messages[i], rows[f"order-{i}"]
        assert row.rowtime == row.event_timestamp == m.event_timestamp.ToDatetime()  # INT64 ms and seconds/nanos
        assert row.metadata == dict(m.metadata)  # standard MAP and legacy repeated group {key; value}
        assert row.item_tags == list(m.item_tags)
        assert (
            row.service_type
            == Booking.DESCRIPTOR.fields_by_name["service_type"].enum_type.values_by_number[m.service_type].name
        )
        assert row.driver_pickup_location.latitude == pytest.approx(m.driver_pickup_location.latitude)
        assert row.amount_paid_by_cash == m.amount_paid_by_cash
        assert row.driver_dropoff_location is None  # an unset message stays NULL, as from Kafka
        assert row["__internal_validation_field__"] is True
    assert rows["order-5"].driver_id == ""  # missing from the 09:00 file: the proto default
    assert rows["order-65"].driver_id == messages[65].driver_id
    assert "ingested_by" not in _frame(spark, stencil, _parquet_stream([str(root)])).columns


def test_the_table_has_the_columns_and_types_a_kafka_stream_has(spark, stencil, dataset):
    from dagger.serde.types import table_schema

    root, _ = dataset
    frame = _frame(spark, stencil, _parquet_stream([str(root)]))
    expected = table_schema(Booking.DESCRIPTOR)
    assert [(f.name, f.dataType) for f in frame.schema.fields] == [(f.name, f.dataType) for f in expected.fields]


def test_unknown_enum_names_fall_back_to_the_default_and_numbers_are_named(spark, stencil, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = partition_path(tmp_path, T0) / "enums.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "order_number": ["a", "b", "c"],
                "service_type": ["GO_FOOD", "GO_TELEPORT", None],
                "status": pa.array([2, 3, 9], pa.int32()),
            }
        ),
        path,
    )
    rows = {r.order_number: r for r in _frame(spark, stencil, _parquet_stream([str(tmp_path)])).collect()}
    assert [rows[k].service_type for k in "abc"] == ["GO_FOOD", "UNKNOWN_SERVICE", "UNKNOWN_SERVICE"]
    assert [rows[k].status for k in "abc"] == ["COMPLETED", "CANCELLED", "9"]
    assert rows["a"].rowtime == dt.datetime(1970, 1, 1)  # no Timestamp column: epoch 0, as a Kafka record without one


def test_files_are_read_in_chronological_order_of_their_partitions(spark, stencil, dataset):
    from pyspark.sql import functions as F

    root, _ = dataset
    by_mtime = sorted(Path(root).rglob("part-*.parquet"), key=os.path.getmtime)
    assert [f.name for f in by_mtime] == ["part-a.parquet", "part-m.parquet", "part-z.parquet"]  # newest data first
    frame = _frame(spark, stencil, _parquet_stream([str(root)]))
    spans = (
        frame.groupBy(F.spark_partition_id().alias("p"))
        .agg(F.min("rowtime").alias("first"), F.max("rowtime").alias("last"))
        .orderBy("p")
        .collect()
    )
    assert len(spans) == 3
    for earlier, later in zip(spans, spans[1:], strict=False):
        assert earlier["last"] < later["first"]


def test_earliest_index_first_reads_the_paths_in_the_order_given(spark, stencil, dataset):
    from pyspark.sql import functions as F

    root, _ = dataset
    newest_first = [str(partition_path(root, T0 + dt.timedelta(hours=h))) for h in (2, 1, 0)]
    stream = _parquet_stream(newest_first, SOURCE_PARQUET_READ_ORDER_STRATEGY="EARLIEST_INDEX_FIRST")
    frame = _frame(spark, stencil, stream)
    firsts = (
        frame.groupBy(F.spark_partition_id().alias("p")).agg(F.min("rowtime").alias("first")).orderBy("p").collect()
    )
    assert [row["first"].hour for row in firsts] == [11, 10, 9]  # the listed order, not time order


def test_listing_skips_hidden_files_and_orders_by_partition_time(spark, dataset):
    from dagger.parquet.source import list_files
    from dagger.parquet.time_partitions import order_files, parse_date_ranges

    root, _ = dataset
    files = list_files(spark, [str(root)], "here")
    assert len(files) == 3 and all(f.endswith(".parquet") and "/." not in f for f in files)
    assert list_files(spark, [f"file://{root}"], "here") == files  # a filesystem URL lists the same files
    ordered = [Path(p).name for _, p in order_files(files, "EARLIEST_TIME_URL_FIRST", [], "here")]
    assert ordered == ["part-z.parquet", "part-m.parquet", "part-a.parquet"]
    ranges = parse_date_ranges("2026-11-22T09:00:00Z,2026-11-22T09:59:59Z;2026-11-22T11:00:00Z,2026-11-22T12:00:00Z")
    assert [Path(p).name for _, p in order_files(files, "EARLIEST_TIME_URL_FIRST", ranges, "here")] == [
        "part-z.parquet",
        "part-a.parquet",
    ]


def test_date_range_selects_whole_partitions_as_dagger_does(tmp_path):
    from dagger.parquet.time_partitions import order_files, parse_date_ranges

    files = [
        "file:/d/dt=2026-11-20/a.parquet",
        "file:/d/dt=2026-11-21/b.parquet",
        "file:/d/dt=2026-11-22/hr=00/c.parquet",
        "file:/d/dt=2026-11-22/hr=10/d.parquet",
        "file:/d/dt=2026-11-22/hr=11/e.parquet",
    ]

    def pick(text: str) -> list[str]:
        return [
            p.rsplit("/", 1)[1] for _, p in order_files(files, "EARLIEST_TIME_URL_FIRST", parse_date_ranges(text), "x")
        ]

    assert pick("2026-11-21T00:00:00Z,2026-11-22T10:00:00Z") == ["b.parquet", "c.parquet", "d.parquet"]
    # a day partition's instant is its midnight: a range starting later skips that day (Dagger's rule)
    assert pick("2026-11-20T00:00:01Z,2026-11-21T23:59:59Z") == ["b.parquet"]
    assert pick("2026-11-20T00:00:00Z,2026-11-20T00:00:00Z;2026-11-22T11:00:00Z,2026-11-23T00:00:00Z") == [
        "a.parquet",
        "e.parquet",
    ]


def test_parquet_job_emits_the_same_windows_as_the_same_records_in_kafka(
    spark, broker, stencil, topic, dataset, tmp_path
):
    root, messages = dataset
    source, from_parquet, from_kafka = topic("pq-src", partitions=2), topic("pq-out"), topic("pq-kout")
    produce(broker.bootstrap, source, ((None, m.SerializeToString()) for m in messages), partitions=2)

    sink = "dagger.examples.BookingCountMessage"
    parquet_job = job(stencil, [_parquet_stream([str(root)])], WINDOW_SQL, **kafka_sink(broker, from_parquet, sink))
    manager, run = run_job(spark, parquet_job, tmp_path / "cp-pq")
    assert run.exception() is None, run.exception()
    assert manager.bounded and run.lastProgress["numInputRows"] == 180

    bounded_kafka = kafka_stream(broker, source, SOURCE_KAFKA_ENDING_OFFSETS="latest")
    _, run = run_job(
        spark, job(stencil, [bounded_kafka], WINDOW_SQL, **kafka_sink(broker, from_kafka, sink)), tmp_path / "cp-k"
    )
    assert run.exception() is None, run.exception()

    def windows(out: str) -> set:
        records = [Count.FromString(m.value()) for m in consume_all(broker.bootstrap, out, expected=18)]
        assert len(records) == 18
        return {
            (r.service_area_id, r.booking_count, r.window_timestamp.ToDatetime(), round(r.total_distance_in_kms, 6))
            for r in records
        }

    expected = set()
    for w in range(6):  # every 30-minute window has data, the last one included
        end = T0 + dt.timedelta(minutes=30 * (w + 1))
        for area in AREAS:
            chosen = [m for m in messages[30 * w : 30 * (w + 1)] if m.service_area_id == area]
            expected.add(
                (area, len(chosen), end.replace(tzinfo=None), round(sum(m.total_distance_in_kms for m in chosen), 6))
            )
    assert windows(from_parquet) == expected
    assert windows(from_kafka) == expected


def test_rerunning_the_same_bounded_input_reuses_its_batch_id(spark, stencil, dataset, tmp_path):
    root, _ = dataset
    data = job(stencil, [_parquet_stream([str(root)])], "SELECT order_number FROM data_stream_0")
    ids = []
    for extra in ({}, {}, {"SOURCE_PARQUET_FILE_DATE_RANGE": "2026-11-22T09:00:00Z,2026-11-22T09:00:00Z"}):
        stream = _parquet_stream([str(root)], **extra)
        _, run = run_job(spark, {**data, "STREAMS": [stream]}, tmp_path / "cp")
        assert run.exception() is None
        ids.append((run.lastProgress["batchId"], run.lastProgress["numInputRows"]))
    assert ids == [(0, 180), (0, 180), (1, 60)]


def test_bad_paths_ranges_and_types_are_clear_errors(spark, stencil, dataset, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pytest.raises(DaggerConfigError, match=r"SOURCE_PARQUET_FILE_PATHS: .*/nowhere does not exist"):
        _frame(spark, stencil, _parquet_stream([str(tmp_path / "nowhere")]))

    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(pa.table({"order_number": ["x"]}), flat / "x.parquet")
    with pytest.raises(DaggerConfigError, match=r"x.parquet is not in a dt=YYYY-MM-DD\[/hr=HH\] partition directory"):
        _frame(spark, stencil, _parquet_stream([str(flat)]))

    with pytest.raises(DaggerConfigError, match=r"range 1 starts at 2026-11-23T00:00:00\+00:00 after it ends"):
        load_config(
            data=job(
                stencil, [_parquet_stream(["/x"], SOURCE_PARQUET_FILE_DATE_RANGE="2026-11-23,2026-11-22")], "SELECT 1"
            )
        )
    with pytest.raises(DaggerConfigError, match=r"range 1 '2026-11-22T00:00:00Z' must be START,END"):
        load_config(
            data=job(
                stencil, [_parquet_stream(["/x"], SOURCE_PARQUET_FILE_DATE_RANGE="2026-11-22T00:00:00Z")], "SELECT 1"
            )
        )
    with pytest.raises(DaggerConfigError, match=r"'yesterday' is not an instant"):
        load_config(
            data=job(
                stencil,
                [_parquet_stream(["/x"], SOURCE_PARQUET_FILE_DATE_RANGE="yesterday,2026-11-22T00:00:00Z")],
                "SELECT 1",
            )
        )

    typed = tmp_path / "typed"
    path = partition_path(typed, T0) / "bad.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"order_number": ["x"], "amount_paid_by_cash": ["lots"]}), path)
    with pytest.raises(
        DaggerConfigError,
        match=r"Parquet column 'amount_paid_by_cash' is STRING but proto field "
        r"dagger.examples.BookingLogMessage.amount_paid_by_cash needs BIGINT",
    ):
        _frame(spark, stencil, _parquet_stream([str(typed)]))


def test_mixing_bounded_and_unbounded_streams_is_a_config_error(spark, broker, stencil, dataset):
    from dagger.job import Job

    root, _ = dataset
    kafka = kafka_stream(broker, "live", table="live")
    with pytest.raises(DaggerConfigError, match=r"data_stream_0 bounded but live not"):
        Job(load_config(data=job(stencil, [_parquet_stream([str(root)]), kafka], "SELECT 1")), spark=spark)


def test_listing_skips_writer_marker_files_and_names_a_stray_one(spark, tmp_path):
    from dagger.errors import DaggerConfigError
    from dagger.parquet.source import list_files
    from dagger.parquet.time_partitions import order_files

    hour = partition_path(tmp_path, T0)
    write_standard(hour / "part-0.parquet", _messages(2))
    for marker in ("_SUCCESS", "part-0.parquet.crc", ".part-0.parquet.crc", "part-1.parquet._COPYING_"):
        (hour / marker).write_text("")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "_temporary" / "0").mkdir(parents=True)
    (tmp_path / "_temporary" / "0" / "part-9.parquet").write_text("half written")
    files = list_files(spark, [str(tmp_path)], "here")
    assert [Path(f).name for f in files] == ["part-0.parquet"]
    assert len(order_files(files, "EARLIEST_TIME_URL_FIRST", [], "here")) == 1
    (tmp_path / "notes.txt").write_text("a file a person left here")
    files = list_files(spark, [str(tmp_path)], "here")
    with pytest.raises(DaggerConfigError, match=r"here: .*notes\.txt is not in a dt=YYYY-MM-DD\[/hr=HH\] partition"):
        order_files(files, "EARLIEST_TIME_URL_FIRST", [], "here")


def test_daggers_message_declared_out_of_field_order_maps_by_name(spark, stencil, tmp_path):
    """TestBookingLogMessage declares field 41 before 40; the files hold the columns in yet another order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ms = int(T0.timestamp() * 1000)
    location = pa.struct([("longitude", pa.float64()), ("latitude", pa.float64())])
    table = pa.table(
        {
            "total_customer_discount": pa.array([1.5, 2.5], pa.float32()),
            "metadata": pa.array([[("city", "Mumbai")], []], pa.map_(pa.string(), pa.string())),
            "booking_creation_time": pa.array([ms - 60_000, ms - 30_000], pa.int64()),
            "driver_pickup_location": pa.array([{"longitude": 72.87, "latitude": 19.07}, None], location),
            "order_number": ["a", "b"],
            "event_timestamp": pa.array([ms, ms + 1000], pa.int64()),
        }
    )
    path = partition_path(tmp_path, T0) / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    stream = _parquet_stream(
        [str(tmp_path)], INPUT_SCHEMA_PROTO_CLASS="org.raystack.dagger.consumer.TestBookingLogMessage"
    )
    rows = {r["order_number"]: r for r in _frame(spark, stencil, stream).collect()}
    assert rows["a"]["total_customer_discount"] == 1.5 and rows["b"]["total_customer_discount"] == 2.5
    assert rows["a"]["booking_creation_time"] == T0.replace(tzinfo=None) - dt.timedelta(minutes=1)
    assert rows["a"]["driver_pickup_location"]["latitude"] == 19.07
    assert rows["a"]["metadata"] == {"city": "Mumbai"} and rows["b"]["metadata"] == {}
    assert rows["b"]["rowtime"] == T0.replace(tzinfo=None) + dt.timedelta(seconds=1)
