"""Which Avro decoder for Confluent-framed Kafka records: speed, and what each does with a bad record.

Nothing of Dagger's is in the path. Records are written with fastavro's ``schemaless_writer`` behind Confluent's
5-byte header. Two parts, each in the environment that has its libraries:

* ``--part python`` (a scratch venv: ``pip install fastavro polars-avro==0.13.0 duckdb==1.5.5
  duckdb-extension-avro==1.5.5 numpy``): fastavro record by record; the "container trick" (a batch's datums, headers
  cut, wrapped as one Avro container block) read by polars-avro (arrow-avro), polars' own reader and DuckDB's
  extension; then the same readers on six bad batches, each in a subprocess with a 5-s timeout, since one of them
  does not end.
* ``--part spark`` (the project's ``.venv``): Spark's ``from_avro`` (spark-avro, JVM) over the same payloads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import struct
import subprocess
import sys
import time

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "price", "type": ["null", "double"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "addr",
            "type": {
                "type": "record",
                "name": "Addr",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
            },
        },
    ],
}
SMALL = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}


def datums(n: int, schema: dict = SCHEMA) -> list[bytes]:
    import fastavro

    parsed = fastavro.parse_schema(schema)
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    out = []
    for i in range(n):
        if schema is SMALL:
            record = {"id": i, "name": "abc"}
        else:
            record = {
                "id": i,
                "name": f"n{i}",
                "price": None if i % 7 == 0 else i * 0.5,
                "ts": start + dt.timedelta(seconds=i),
                "tags": ["a", "b"][: i % 3],
                "addr": {"city": "c", "zip": i % 1000},
            }
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, record)
        out.append(buffer.getvalue())
    return out


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def container(body: list[bytes], schema: dict) -> bytes:
    """The datums as one block of an Avro container file (no codec)."""
    sync = b"0123456789abcdef"
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": b"null"}
    out = bytearray(b"Obj\x01" + _zigzag(len(meta)))
    for key, value in meta.items():
        out += _zigzag(len(key)) + key.encode() + _zigzag(len(value)) + value
    joined = b"".join(body)
    out += b"\x00" + sync + _zigzag(len(body)) + _zigzag(len(joined)) + joined + sync
    return bytes(out)


def read_with(reader: str, data: bytes, arrow: bool = False) -> object:
    """The rows of a container file by ``reader``: as Python objects, or (``arrow``) as an Arrow table."""
    if reader == "polars-avro":
        import polars_avro

        frame = polars_avro.read_avro(io.BytesIO(data))
        return frame.to_arrow() if arrow else frame.to_dicts()
    if reader == "polars":
        import polars

        frame = polars.read_avro(io.BytesIO(data))
        return frame.to_arrow() if arrow else frame.to_dicts()
    import duckdb
    import duckdb_extension_avro

    path = "/dev/shm/avro-decoders.avro"
    with open(path, "wb") as f:
        f.write(data)
    connection = duckdb.connect()
    connection.load_extension(
        f"{duckdb_extension_avro.__path__[0]}/extensions/v{duckdb.__version__}/avro.duckdb_extension"
    )
    result = connection.execute(f"SELECT * FROM read_avro('{path}')")
    return result.to_arrow_table() if arrow else result.fetchall()


#: batches of three records with one bad one: (name, records)
def bad_batches() -> dict[str, list[bytes]]:
    good = datums(3, SMALL)
    return {
        "good": good,
        "truncated in the middle": [good[0], good[1][:-2], good[2]],
        "two bytes too many at the end": [good[0], good[1], good[2] + b"\x00\x00"],
        "one byte too many in the middle": [good[0], good[1] + b"\x02", good[2]],
        "empty in the middle": [good[0], b"", good[2]],
        "garbage": [b"\xff" * 11],
    }


def python_part(n: int) -> None:
    import fastavro

    payloads = [struct.pack(">bI", 0, 7) + d for d in datums(n)]
    parsed = fastavro.parse_schema(SCHEMA)
    began = time.perf_counter()
    [fastavro.schemaless_reader(io.BytesIO(p[5:]), parsed, None) for p in payloads]
    print(f"fastavro, record by record: {n / (time.perf_counter() - began) / 1e6:.2f} M records/s")
    block = container([p[5:] for p in payloads], SCHEMA)  # built once, outside the timing
    for reader in ("polars-avro", "polars", "duckdb"):
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            rows = read_with(reader, block, arrow=True)
            best = min(best, time.perf_counter() - began)
        print(f"{reader}, one container block, into Arrow: {n / best / 1e6:.2f} M records/s ({len(rows)} rows)")
    for name in bad_batches():
        for reader in ("polars-avro", "polars", "duckdb"):
            code = (
                "import sys; sys.path.insert(0, 'docs/investigations'); import avro_decoders as a; "
                f"b = a.bad_batches()[{name!r}]; print(a.read_with({reader!r}, a.container(b, a.SMALL)))"
            )
            try:
                done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=5)
                said = (done.stdout.strip() or done.stderr.strip().splitlines()[-1])[:110]
            except subprocess.TimeoutExpired:
                said = "DOES NOT END (killed after 5 s)"
            print(f"{name:32s} {reader:12s} {said}")


def spark_part(n: int) -> None:
    import pyspark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.jars.packages", f"org.apache.spark:spark-avro_2.13:{pyspark.__version__}")  # Maven Central
        .getOrCreate()
    )
    rows = [(p,) for p in datums(n)]
    df = spark.createDataFrame(rows, "payload binary").cache()
    df.count()
    schema = json.dumps(SCHEMA)
    for _ in range(2):  # warm
        df.select(from_avro("payload", schema).alias("r")).select(F.sum("r.id")).collect()
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        df.select(from_avro("payload", schema).alias("r")).select(F.sum("r.id"), F.count("r.addr.city")).collect()
        best = min(best, time.perf_counter() - began)
    print(f"from_avro (spark-avro, one core): {n / best / 1e6:.2f} M records/s")
    small = json.dumps(SMALL)
    for name, batch in bad_batches().items():
        out = spark.createDataFrame([(b,) for b in batch], "payload binary")
        got = out.select(from_avro("payload", small, {"mode": "PERMISSIVE"}).alias("r")).collect()
        print(f"{name:32s} from_avro    {[r.r.asDict() if r.r else None for r in got]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("python", "spark"), required=True)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    (python_part if args.part == "python" else spark_part)(args.records)


if __name__ == "__main__":
    main()
