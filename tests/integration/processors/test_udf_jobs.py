"""Functions inside real streaming jobs (Kafka in, Kafka out), and user functions from files, zips, URLs and
factory modules."""

from __future__ import annotations

import collections
import json
import math
import zipfile

import pygeohash
import pytest

from testing.produce import produce, topic_size
from testing.samples import AREAS, bookings
from tests.conftest import START, job, kafka_sink, kafka_stream, output_rows, run_job

pytestmark = pytest.mark.integration

MULTIPLY = '''
def multiply(a: float, b: float) -> float:
    """Dagger's sample UDF: the function is named like its file."""
    return a * b
'''


def _median(values: list[float]) -> float:  # Commons Math default estimate at p=50
    ordered, n = sorted(values), len(values)
    pos = 50 * (n + 1) / 100
    if n == 1 or pos < 1:
        return ordered[0]
    if pos >= n:
        return ordered[-1]
    low = ordered[math.floor(pos) - 1]
    return low + (pos - math.floor(pos)) * (ordered[math.floor(pos)] - low)


def test_scalar_aggregate_table_and_user_functions_in_a_streaming_window_job(spark, broker, stencil, topic, tmp_path):
    from testing.descriptor_server import DescriptorServer

    source, out = topic("udf-in", 2), topic("udf-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(120, START)), partitions=2)
    (tmp_path / "multiply.py").write_text(MULTIPLY)
    sql = """
        SELECT service_area_id, bucket, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp,
               DistinctCount(customer_id) AS customers,
               PercentileAggregator(50, total_distance_in_kms) AS median_distance,
               array_sort(CollectArray(DISTINCT GeoHash(driver_pickup_location.latitude,
                                                        driver_pickup_location.longitude, 5))) AS cells,
               size(Features(customer_id, amount_paid_by_cash)) AS features,
               size(FeaturesWithType('cash', amount_paid_by_cash, 'LongType')) AS typed_features,
               SUM(MULTIPLY(total_distance_in_kms, 2.0)) AS double_distance
        FROM data_stream_0, LATERAL TABLE(HistogramBucket(total_distance_in_kms, '2,4')) AS h(bucket)
        GROUP BY service_area_id, bucket, TUMBLE(rowtime, INTERVAL '1' MINUTE)
    """
    with DescriptorServer(tmp_path) as files:
        data = job(
            stencil,
            [kafka_stream(broker, source)],
            sql,
            PYTHON_UDF_ENABLE="true",
            PYTHON_UDF_CONFIG=json.dumps({"PYTHON_FILES": files.url("multiply.py")}),
            **kafka_sink(broker, out, "", SINK_KAFKA_DATA_TYPE="JSON"),
        )
        manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = [json.loads(m.value()) for m in output_rows(broker, manager, out, topic_size(broker.bootstrap, out))]

    # expected, from the generator's rules: booking i (second i) is in AREAS[i % 3], customer c{i % 5},
    # distance i % 7, cash i*10; only the first minute is closed by the watermark at the end of the input
    groups = collections.defaultdict(list)
    for i in range(60):
        distance = float(i % 7)
        for bucket in ["+Inf"] + [b for b in ("2", "4") if distance <= float(b)]:
            groups[(AREAS[i % 3], bucket)].append(i)
    expected = {
        key: {
            "customers": len({f"c{i % 5}" for i in ids}),
            "median_distance": _median([float(i % 7) for i in ids]),
            "cells": sorted({pygeohash.encode(-6.2 + i * 0.001, 106.8, 5) for i in ids}),
            "features": len(ids),
            "typed_features": len(ids),
            "double_distance": sum(2.0 * (i % 7) for i in ids),
        }
        for key, ids in groups.items()
    }
    got = {
        (r["service_area_id"], r["bucket"]): {k: r[k] for k in expected[next(iter(expected))]}
        for r in rows
        if r["window_timestamp"].startswith("2026-11-22T10:01:00")
    }
    assert len(rows) == len(expected)
    assert got == expected


def test_python_udf_files_local_zip_and_url_with_errors_naming_udf_input_and_file(spark, tmp_path):
    from dagger.functions import register
    from dagger.job import load_config
    from dagger.python_udfs import load_python_udfs
    from testing.descriptor_server import DescriptorServer

    (tmp_path / "multiply.py").write_text(MULTIPLY)
    (tmp_path / "shout.py").write_text(
        "import pyarrow as pa\nimport pyarrow.compute as pc\nimport udfs\n\n"
        "@udfs.udf(returns='string')\ndef shout(text: pa.Array) -> pa.Array:\n    return pc.utf8_upper(text)\n\n"
        "@udfs.udf(returns='double', name='RECIPROCAL')\ndef reciprocal(x: float) -> float:\n    return 1 / x\n"
    )
    with zipfile.ZipFile(tmp_path / "team.zip", "w") as archive:
        archive.writestr("team_udfs/__init__.py", "")
        archive.writestr("team_udfs/add_one.py", "def add_one(x: int) -> int:\n    return x + 1\n")
    with DescriptorServer(tmp_path) as files:
        config = load_config(
            data={
                "FLINK_SQL_QUERY": "SELECT 1",
                "STREAMS": [
                    {
                        "SOURCE_KAFKA_TOPIC_NAMES": "unused",
                        "INPUT_SCHEMA_TABLE": "data_stream_0",
                        "INPUT_SCHEMA_PROTO_CLASS": "dagger.examples.BookingLogMessage",
                        "INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX": "5",
                        "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": "127.0.0.1:9",
                    }
                ],
                "SCHEMA_REGISTRY_STENCIL_URLS": "descriptors/examples.desc",
                "PYTHON_UDF_ENABLE": True,
                "PYTHON_UDF_CONFIG": {
                    "PYTHON_FILES": f"{tmp_path / 'multiply.py'},{files.url('shout.py')},{tmp_path / 'team.zip'}"
                },
            }
        )
        functions = load_python_udfs(config, spark)
    assert sorted(f.name for f in functions) == ["ADD_ONE", "MULTIPLY", "RECIPROCAL", "shout"]
    for function in functions:
        from dagger.functions import FunctionCatalog

        catalog = FunctionCatalog()
        catalog.add(function, "test")
        register(spark, catalog, None)
    row = spark.sql("SELECT multiply(3.0D, 2.5D), SHOUT('dagger'), add_one(41), reciprocal(4.0D)").first()
    assert tuple(row) == (7.5, "DAGGER", 42, 0.25)
    with pytest.raises(Exception, match=r"Python UDF RECIPROCAL \(shout.py\) failed on input \(0.0,\): ZeroDivision"):
        spark.sql("SELECT reciprocal(0.0D)").collect()


def test_function_factory_modules_register_their_functions(spark, tmp_path, monkeypatch):
    from dagger.functions import build_catalog, register
    from dagger.sql.rewrite import rewrite_sql

    (tmp_path / "team_library.py").write_text(
        "from udfs.declare import Example, macro, sql_function\n\n"
        "@sql_function('Triple', 'x BIGINT', 'BIGINT')\ndef triple():\n    '''Three times x.'''\n    return 'x * 3'\n\n"
        "@macro('Twice', 'Twice(x) -> x')\ndef twice(args):\n    '''Two times x.'''\n    return f'({args[0].sql()}) * 2'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    class Config:
        FUNCTION_FACTORY_CLASSES = ["team_library"]

    catalog = build_catalog(Config())
    register(spark, catalog, None)
    assert spark.sql(rewrite_sql("SELECT Triple(Twice(7))", catalog.macros)).first()[0] == 42

    class PortedFromDagger:  # Dagger's own Java factory names the built-in library, which is always there
        FUNCTION_FACTORY_CLASSES = ["org.raystack.dagger.functions.udfs.factories.FunctionFactory"]

    assert "GEOHASH" in build_catalog(PortedFromDagger()).functions

    class Missing:
        FUNCTION_FACTORY_CLASSES = ["no_such_team_module"]

    from dagger.errors import DaggerConfigError

    with pytest.raises(DaggerConfigError, match=r"FUNCTION_FACTORY_CLASSES: cannot import 'no_such_team_module'"):
        build_catalog(Missing())


def test_a_job_registers_only_the_functions_its_sql_and_settings_can_reach(spark, tmp_path):
    """Each Arrow UDF costs ~10 ms at every job start; the ones the job cannot call are left out."""
    from dagger.functions import build_catalog, register

    class Config:
        FUNCTION_FACTORY_CLASSES: list[str] = []

    catalog = build_catalog(Config())
    sql = "SELECT GeoHash(lat, lon, 5) AS cell FROM t"
    settings = '{"PROCESSOR_POSTPROCESSOR_CONFIG": "... S2AreaInKm2(cell) ..."}'
    assert catalog.needed([sql, settings]) == {"GEOHASH", "S2AREAINKM2"}
    assert catalog.needed(["SELECT order_number FROM t WHERE amount < 500"]) == set()
    # a macro may expand to any internal helper: all of them come along
    assert {"JSONUPDATE", "__JSONUPDATE", "__FILTERS"} <= catalog.needed(["SELECT JsonUpdate(j, '$.a', 1) FROM t"])
    # an internal name (what the rewritten SQL holds) counts as much as the public one
    assert catalog.needed(["SELECT __dagger_geohash(a, b, 5)"]) == {"GEOHASH"}

    spark.sql("DROP TEMPORARY FUNCTION IF EXISTS __dagger_s2id")
    register(spark, catalog, None, sql_functions=False, only=catalog.needed([sql]))
    assert spark.sql("SELECT __dagger_geohash(1.0D, 2.0D, 5)").first()[0] == "s01mt"
    with pytest.raises(Exception, match="__dagger_s2id"):
        spark.sql("SELECT __dagger_s2id(1.0D, 2.0D, 10)").collect()
