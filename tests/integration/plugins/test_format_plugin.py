"""A format from outside the package: an installed package registers ``INPUT_DATATYPE=CSV`` through the
``dagger.formats`` entry point (one module, one class), and a job reads it through ``dagger run`` (our Kafka reader,
its Python workers loading the package the same way) and ``dagger test`` (the case's records made by the format)."""

from __future__ import annotations

import json
import os

from testing.produce import consume_all, produce, topic_size
from tests.conftest import dagger, job, json_sink, validate_here

#: the toy package: comma-separated values, columns named and typed by INPUT_SCHEMA_CSV_COLUMNS
CSV_PACKAGE = '''
"""Comma-separated records: a toy input data type for Dagger on Spark."""

import datetime as dt

import pyarrow as pa
from pydantic import Field
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from dagger.plugins.format import VALIDITY_COLUMN, Format, InputFormatSettings

TYPES = {"long": (LongType(), int), "string": (StringType(), str), "timestamp": (TimestampType(), None)}


class CsvSettings(InputFormatSettings):
    """Comma-separated records."""

    INPUT_SCHEMA_CSV_COLUMNS: str = Field(description="name:type,... (long, string, timestamp)")
    INPUT_SCHEMA_CSV_ROWTIME: str = Field(description="The timestamp column that becomes rowtime.")


def _columns(text):
    return [tuple(part.split(":")) for part in text.split(",")]


class Decoded:
    def __init__(self, batch, invalid, reasons):
        self.batch, self.invalid, self.reasons = batch, invalid, reasons


class CsvDecoder:
    def __init__(self, columns, rowtime_source, rowtime):
        self.columns, self.rowtime_source = columns, rowtime_source
        record = [StructField(name, TYPES[kind][0]) for name, kind in columns]
        self.spark_schema = StructType(
            [*record, StructField(VALIDITY_COLUMN, BooleanType(), False), StructField(rowtime, TimestampType())]
        )
        self.arrow_schema = to_arrow_schema(self.spark_schema, timezone="UTC")

    def decode(self, values):
        values = values.to_pylist() if isinstance(values, pa.Array) else list(values)
        rows, invalid, reasons = [], [], []
        for i, value in enumerate(values):
            parts = (value or b"").decode().split(",")
            try:
                if len(parts) != len(self.columns):
                    raise ValueError(f"{len(parts)} values, {len(self.columns)} columns")
                row = {}
                for (name, kind), text in zip(self.columns, parts):
                    convert = TYPES[kind][1]
                    row[name] = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC) if convert is None else convert(text)
                row[VALIDITY_COLUMN], row["_rowtime"] = True, row[self.rowtime_source]
            except ValueError as exc:
                invalid.append(i)
                reasons.append(f"not a CSV record: {exc}")
                row = {VALIDITY_COLUMN: False, "_rowtime": dt.datetime(1970, 1, 1, tzinfo=dt.UTC)}
            rows.append(row)
        arrays = [pa.array([r.get(f.name) for r in rows], f.type) for f in self.arrow_schema][:-1]
        arrays.append(pa.array([r["_rowtime"] for r in rows], self.arrow_schema.field(len(arrays)).type))
        return Decoded(pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema), invalid, reasons)


class Csv(Format):
    settings_model = CsvSettings

    def record_struct(self, stream, descriptors):
        return StructType([StructField(n, TYPES[k][0]) for n, k in _columns(stream.format.INPUT_SCHEMA_CSV_COLUMNS)])

    def rowtime_field(self, stream):
        return stream.format.INPUT_SCHEMA_CSV_ROWTIME

    def reader_options(self, stream, descriptors, env):
        return {"columns": stream.format.INPUT_SCHEMA_CSV_COLUMNS, "rowtime_source": self.rowtime_field(stream)}

    def decoder(self, options, fields, rowtime):
        return CsvDecoder(_columns(options["columns"]), options["rowtime_source"], rowtime)

    def test_encoder(self, stream, descriptors):
        names = [n for n, _ in _columns(stream.format.INPUT_SCHEMA_CSV_COLUMNS)]
        return lambda record: ",".join(str(record[n]) for n in names).encode()

'''


def _install(tmp_path) -> dict[str, str]:
    """The package installed in a directory of its own (module + dist-info with its entry point); the environment
    that puts it on the path of ``dagger`` and of Spark's Python workers."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "dagger_csv.py").write_text(CSV_PACKAGE)
    info = site / "dagger_csv-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dagger-csv\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dagger.formats]\nCSV = dagger_csv:Csv\n")  # the class: no register call
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def _stream(broker, source: str) -> dict:
    return {
        "SOURCE_KAFKA_TOPIC_NAMES": source,
        "INPUT_SCHEMA_TABLE": "people",
        "INPUT_DATATYPE": "CSV",
        "INPUT_SCHEMA_CSV_COLUMNS": "id:long,name:string,seen:timestamp",
        "INPUT_SCHEMA_CSV_ROWTIME": "seen",
        "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": broker.bootstrap,
        "SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET": "earliest",
        "SOURCE_KAFKA_CONSUMER_CONFIG_GROUP_ID": f"g-{source}",
        "SOURCE_KAFKA_ENDING_OFFSETS": "latest",
        "SOURCE_KAFKA_INVALID_RECORD_POLICY": "drop",
    }


def test_a_format_registered_by_an_installed_package_runs_a_job_through_dagger_run_and_dagger_test(
    broker, topic, tmp_path
):
    env = _install(tmp_path)
    source, out = topic("csv-in"), topic("csv-out")
    records = [
        b"1,alice,2026-11-22T10:00:01",
        b"2,bob,2026-11-22T10:00:02",
        b"three,carol",
        b"4,dora,2026-11-22T10:00:04",
    ]
    produce(broker.bootstrap, source, ((None, v) for v in records))
    sql = "SELECT id, upper(name) AS name FROM people"
    data = job(None, [_stream(broker, source)], sql, **json_sink(broker, out))
    data["TESTS"] = [
        {
            "NAME": "upper-cases the names",
            "INPUT": {"people": [{"id": 7, "name": "erin", "seen": "2026-11-22T10:00:07"}]},
            "EXPECTED": {"SINK": [{"id": 7, "name": "ERIN"}]},
        }
    ]
    path = tmp_path / "csv.json"
    path.write_text(json.dumps(data))

    validated = dagger("validate", str(path), env=env)
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert "as CSV, 5 columns" in validated.stdout, validated.stdout

    run = dagger("run", str(path), "--checkpoint-dir", str(tmp_path / "cp"), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    written = [json.loads(m.value()) for m in consume_all(broker.bootstrap, out, expected=3)]
    assert sorted((r["id"], r["name"]) for r in written) == [(1, "ALICE"), (2, "BOB"), (4, "DORA")]
    assert topic_size(broker.bootstrap, out) == 3
    assert "invalid records {'people': 1}" in run.stderr, run.stderr[-2000:]  # the CSV decoder's, dropped

    tested = dagger("test", str(path), env=env)
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr[-2000:]
    assert tested.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"


def test_without_the_package_the_format_is_named_among_those_accepted(spark, broker, topic, tmp_path):
    data = job(None, [_stream(broker, topic("csv-none"))], "SELECT id FROM people")
    path = tmp_path / "csv.json"
    path.write_text(json.dumps(data))
    done = validate_here(spark, str(path))
    assert done.returncode == 2
    assert "INPUT_DATATYPE of stream 'people': 'CSV' is not accepted; accepted: AVRO, JSON, PROTO" in done.stderr
