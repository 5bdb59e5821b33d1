"""Spark 4.2's ``from_avro`` over the same bytes read as a flat record and as one whose eight doubles sit in a
nested record; the nested ones again with ``spark.sql.types.framework.enabled=false`` set (the value its default
gives outside Spark's own tests), with the task's SQL conf pinned for the task's thread (``PinTaskConf.java``, a
filter before the decoding), with both, and by Dagger's decoder (``dagger/jvm/AvroRows.java``, the fix). Nothing of Dagger's in the path: PySpark, spark-avro from Maven
Central, fastavro to write the payloads, and the JDK's ``javac`` for the pinning class. Run from the repository's
root: ``.venv/bin/python docs/investigations/spark_nested_rows.py [records]``."""

import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fastavro
import pyspark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import BooleanType

INNER = [{"name": f"f{i}", "type": "double"} for i in range(8)]
FLAT = {"type": "record", "name": "Flat", "fields": [{"name": "id", "type": "long"}, *INNER]}
NESTED = {
    "type": "record",
    "name": "Nested",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "location", "type": {"type": "record", "name": "Location", "fields": INNER}},
    ],
}


def payloads(n: int) -> list[tuple[bytes]]:
    """The same bytes serve both schemas: a record's fields are written one after the other, nested or not."""
    parsed = fastavro.parse_schema(FLAT)
    out = []
    for i in range(n):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, {"id": i, **{f"f{j}": i / (j + 1) for j in range(8)}})
        out.append((buffer.getvalue(),))
    return out


def pinning_jar() -> str:
    """``PinTaskConf.java`` and Dagger's decoder (``dagger/jvm/AvroRows.java``, the fix) compiled against the
    installed PySpark's jars."""
    out = Path(tempfile.mkdtemp())
    jars = Path(pyspark.__file__).parent / "jars" / "*"
    sources = [Path(__file__).with_name("PinTaskConf.java"), Path(__file__).parents[2] / "dagger/jvm/AvroRows.java"]
    command = ["javac", "--release", "17", "-nowarn", "-cp", str(jars), "-d", str(out), *map(str, sources)]
    subprocess.run(command, check=True)
    subprocess.run(["jar", "cf", str(out / "pin.jar"), "-C", str(out), "dagger"], check=True)
    return str(out / "pin.jar")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars.packages", "org.apache.spark:spark-avro_2.13:4.2.0")
        .config("spark.jars", pinning_jar())
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.udf.registerJavaFunction("pin_task_conf", "dagger.spark.PinTaskConf", BooleanType())
    df = spark.createDataFrame(payloads(n), "payload binary").cache()
    df.count()
    pinned = df.where(F.expr("pin_task_conf(payload)"))

    def decoded(frame, schema):
        return frame.select(from_avro(F.col("payload"), json.dumps(schema)).alias("r")).select("r.*")

    def dagger_decoded(frame, schema):
        """The fix: Dagger's decoder, given the writer schema, the reader (the same, plus the decoded flag) and the
        row's Spark type (the nested record's fields NOT NULL, as the schema says)."""
        from pyspark.sql.classic.column import Column
        from pyspark.sql.types import DoubleType, LongType, StructField, StructType

        inner = StructType([StructField(f["name"], DoubleType(), False) for f in INNER])
        row = StructType(
            [
                StructField("id", LongType(), False),
                StructField("location", inner, False),
                StructField("ok", BooleanType(), False),
            ]
        )
        reader = {**schema, "fields": [*schema["fields"], {"name": "ok", "type": "boolean", "default": True}]}
        writers = {1: json.dumps(schema)}
        rows = spark._jvm.dagger.avro.AvroRows.column(
            F.lit(1)._jc, F.col("payload")._jc, 0, json.dumps(reader), row.json(), writers
        )
        return frame.select(Column(rows).alias("r")).select("r.id", "r.location")

    rounds = {  # name: (query, whether the flag is set)
        "flat": (decoded(df, FLAT), False),
        "nested": (decoded(df, NESTED), False),
        "nested, flag set": (decoded(df, NESTED), True),
        "nested, pinned": (decoded(pinned, NESTED), False),
        "nested, pinned, flag set": (decoded(pinned, NESTED), True),
        "nested, Dagger's decoder": (dagger_decoded(df, NESTED), False),
    }
    rates: dict[str, list[float]] = {name: [] for name in rounds}
    for round_ in range(6):  # alternated; the first round warms the JIT up and is not counted
        for name, (query, flag) in rounds.items():
            if flag:
                spark.conf.set("spark.sql.types.framework.enabled", "false")
            else:
                spark.conf.unset("spark.sql.types.framework.enabled")
            t0 = time.perf_counter()
            query.write.format("noop").mode("overwrite").save()
            rate = n / (time.perf_counter() - t0) / 1e6
            if round_:
                rates[name].append(rate)
    for name, values in rates.items():
        values.sort()
        print(f"{name:26}: median {values[len(values) // 2]:.2f} M records/s of {len(values)} rounds", flush=True)


if __name__ == "__main__":
    main()
