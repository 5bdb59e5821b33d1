"""Sample Parquet datasets of bookings in Dagger's ``dt=YYYY-MM-DD/hr=HH`` layout, in two encodings.

* :func:`write_standard` (pyarrow): the standard ``MAP`` layout, 3-level lists, the event Timestamp as INT64
  epoch milliseconds, enums as names; fields can be left out and extra columns added.
* :func:`write_legacy` (parquet-mr's example writer, through the Spark JVM): the layout of files written by
  older parquet-protobuf tools, which Dagger also reads: maps and lists as bare ``repeated`` fields
  (``repeated group metadata {key; value}``), the Timestamp as a ``seconds``/``nanos`` group.

Used by the tests and by ``configs/parquet_backfill.json``'s example data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _enum(message: Any, field: str) -> str:
    """An enum field's value name (enums are stored as names)."""
    return message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number[getattr(message, field)].name


def partition_path(root: str | Path, instant: Any, hourly: bool = True) -> Path:
    """``root/dt=YYYY-MM-DD[/hr=HH]`` for ``instant`` (a UTC datetime)."""
    path = Path(root) / f"dt={instant:%Y-%m-%d}"
    return path / f"hr={instant:%H}" if hourly else path


def write_standard(
    path: str | Path,
    messages: Sequence[Any],
    leave_out: Iterable[str] = (),
    extra: dict[str, list[Any]] | None = None,
) -> Path:
    """Write BookingLogMessages with pyarrow (standard layouts, INT64 epoch-ms Timestamp)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    location = pa.struct([("name", pa.string()), ("latitude", pa.float64()), ("longitude", pa.float64())])

    def loc(m: Any, name: str) -> dict[str, Any] | None:
        if not m.HasField(name):
            return None
        value = getattr(m, name)
        return {"name": value.name, "latitude": value.latitude, "longitude": value.longitude}

    columns: dict[str, pa.Array] = {
        "order_number": pa.array([m.order_number for m in messages]),
        "service_type": pa.array([_enum(m, "service_type") for m in messages]),
        "status": pa.array([_enum(m, "status") for m in messages]),
        "customer_id": pa.array([m.customer_id for m in messages]),
        "event_timestamp": pa.array([m.event_timestamp.ToMilliseconds() for m in messages], pa.int64()),
        "driver_id": pa.array([m.driver_id for m in messages]),
        "driver_pickup_location": pa.array([loc(m, "driver_pickup_location") for m in messages], location),
        "driver_dropoff_location": pa.array([loc(m, "driver_dropoff_location") for m in messages], location),
        "amount_paid_by_cash": pa.array([m.amount_paid_by_cash for m in messages], pa.int64()),
        "total_distance_in_kms": pa.array([m.total_distance_in_kms for m in messages], pa.float64()),
        "item_tags": pa.array([list(m.item_tags) for m in messages], pa.list_(pa.string())),
        "metadata": pa.array([sorted(m.metadata.items()) for m in messages], pa.map_(pa.string(), pa.string())),
        "service_area_id": pa.array([m.service_area_id for m in messages]),
    }
    for name in leave_out:
        columns.pop(name)
    for name, values in (extra or {}).items():
        columns[name] = pa.array(values)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), out)
    return out


_LEGACY_SCHEMA = """message booking {
  required binary order_number (UTF8);
  required binary service_type (UTF8);
  required binary status (UTF8);
  required binary customer_id (UTF8);
  optional group event_timestamp { required int64 seconds; required int32 nanos; }
  required binary driver_id (UTF8);
  optional group driver_pickup_location { required binary name (UTF8); required double latitude; required double longitude; }
  required int64 amount_paid_by_cash;
  required double total_distance_in_kms;
  repeated binary item_tags (UTF8);
  repeated group metadata { required binary key (UTF8); optional binary value (UTF8); }
  required binary service_area_id (UTF8);
}"""


def write_legacy(spark: SparkSession, path: str | Path, messages: Sequence[Any]) -> Path:
    """Write BookingLogMessages with parquet-mr's ``ExampleParquetWriter`` in the legacy 2-level layout.

    ``driver_dropoff_location`` is left out of the file schema (a missing field).
    """
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    schema = jvm.org.apache.parquet.schema.MessageTypeParser.parseMessageType(_LEGACY_SCHEMA)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    target = jvm.org.apache.hadoop.fs.Path(f"file://{out.resolve()}")
    writer = (
        jvm.org.apache.parquet.hadoop.example.ExampleParquetWriter.builder(target)
        .withType(schema)
        .withConf(spark._jsc.hadoopConfiguration())
        .build()
    )
    factory = jvm.org.apache.parquet.example.data.simple.SimpleGroupFactory(schema)
    # py4j passes small Python ints as Java int; an INT64 column needs Group.append(String, long)
    types = gateway.new_array(jvm.java.lang.Class, 2)
    types[0] = jvm.java.lang.Class.forName("java.lang.String")
    types[1] = jvm.java.lang.Long.TYPE
    append_long = jvm.java.lang.Class.forName("org.apache.parquet.example.data.Group").getMethod("append", types)

    def put_long(group: Any, name: str, value: int) -> None:
        args = gateway.new_array(jvm.java.lang.Object, 2)
        args[0], args[1] = name, value
        append_long.invoke(group, args)

    try:
        for m in messages:
            g = factory.newGroup()
            g.append("order_number", m.order_number)
            g.append("service_type", _enum(m, "service_type"))
            g.append("status", _enum(m, "status"))
            g.append("customer_id", m.customer_id)
            if m.HasField("event_timestamp"):
                ts = g.addGroup("event_timestamp")
                put_long(ts, "seconds", m.event_timestamp.seconds)
                ts.append("nanos", m.event_timestamp.nanos)
            g.append("driver_id", m.driver_id)
            if m.HasField("driver_pickup_location"):
                loc = g.addGroup("driver_pickup_location")
                loc.append("name", m.driver_pickup_location.name)
                loc.append("latitude", float(m.driver_pickup_location.latitude))
                loc.append("longitude", float(m.driver_pickup_location.longitude))
            put_long(g, "amount_paid_by_cash", m.amount_paid_by_cash)
            g.append("total_distance_in_kms", float(m.total_distance_in_kms))
            for tag in m.item_tags:
                g.append("item_tags", tag)
            for key, value in sorted(m.metadata.items()):
                entry = g.addGroup("metadata")
                entry.append("key", key)
                entry.append("value", value)
            g.append("service_area_id", m.service_area_id)
            writer.write(g)
    finally:
        writer.close()
    return out


def write_sample_dataset(root: str | Path, start: Any = None, hours: int = 3, per_hour: int = 60) -> list[Path]:
    """``hours`` hourly partitions of ``per_hour`` bookings each (one a minute) under ``root``; returns the files."""
    import datetime as dt

    from testing.samples import bookings, message_class

    start = start or dt.datetime(2026, 11, 22, 9, 0, tzinfo=dt.UTC)
    booking = message_class("dagger.examples.BookingLogMessage")
    messages = [booking.FromString(b) for b in bookings(hours * per_hour, start, step_seconds=3600 / per_hour)]
    files = []
    for h in range(hours):
        instant = start + dt.timedelta(hours=h)
        chunk = messages[h * per_hour : (h + 1) * per_hour]
        files.append(write_standard(partition_path(root, instant) / "part-0.parquet", chunk))
    return files


if __name__ == "__main__":
    import sys

    target = sys.argv[1] if len(sys.argv) > 1 else "data/bookings-parquet"
    written = write_sample_dataset(target)
    print(f"wrote {len(written)} Parquet files of sample bookings under {target}")
