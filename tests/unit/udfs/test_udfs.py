"""The function library on a real Spark session: documented examples, independently known values, NULLs and
empty arrays, and bad input giving an error that names the function."""

from __future__ import annotations

import datetime as dt
import json
import math
import zoneinfo

import pytest

from tests.conftest import DESCRIPTORS

DART_AREAS = {"jakarta": "DKI", "bandung": "Jabar"}
DART_CITIES = {"data": ["jakarta", "bandung"]}


def write_darts(base) -> None:  # noqa: ANN001
    (base / "dart-get").mkdir(parents=True, exist_ok=True)
    (base / "dart-contains").mkdir(parents=True, exist_ok=True)
    (base / "dart-get" / "areas.json").write_text(json.dumps(DART_AREAS))
    (base / "dart-contains" / "cities.json").write_text(json.dumps(DART_CITIES))


@pytest.fixture(scope="module")
def catalog(spark, tmp_path_factory):
    from dagger.functions import build_catalog, register
    from udfs.declare import UdfContext

    base = tmp_path_factory.mktemp("darts")
    write_darts(base)

    class Config:
        FUNCTION_FACTORY_CLASSES: list = []

    catalog = build_catalog(Config())
    counters = {n: spark.sparkContext.accumulator(0) for n in ("dart_cache_hit", "dart_cache_miss")}
    context = UdfContext((DESCRIPTORS / "examples.desc").read_bytes(), str(base), counters)
    register(spark, catalog, context)
    catalog.context = context
    return catalog


@pytest.fixture(scope="module")
def sql(spark, catalog):
    from dagger.sql.rewrite import rewrite_sql

    def run(query: str, setup: str | None = None) -> list[tuple]:
        if setup:
            spark.sql(setup).createOrReplaceTempView("t")
        return [tuple(r) for r in spark.sql(rewrite_sql(query, catalog.macros)).collect()]

    return run


def one(sql, query: str):  # noqa: ANN001, ANN201
    (row,) = sql(query)
    return row[0] if len(row) == 1 else row


def examples():  # noqa: ANN201
    from udfs import library

    return [
        pytest.param(f, i, ex, id=f"{f.name}-{i}") for f in library() if not f.hidden for i, ex in enumerate(f.examples)
    ]


def test_every_dagger_function_is_in_the_library_and_documented_with_an_example():
    from udfs import library

    names = {f.name for f in library() if not f.hidden}
    dagger = (
        "ArrayAggregate ArrayOperate ByteToString CondEq DartContains DartGet Distance ElementAt EndOfMonth EndOfWeek "
        "ExponentialMovingAverage Filters FormatTimeInZone GeoHash JsonDelete JsonQuery JsonUpdate LinearTrend "
        "ListContains MapGet S2AreaInKm2 S2Id SelectFields SingleFeatureWithType Split StartOfMonth StartOfWeek "
        "TimeInDate TimestampFromUnix CollectArray DistinctCount Features FeaturesWithType PercentileAggregator "
        "HistogramBucket OutlierMad"
    ).split()
    assert set(dagger) <= names, set(dagger) - names
    undocumented = [
        f.name for f in library() if not f.hidden and (not f.doc or (not f.examples and f.name != "CondEq"))
    ]
    assert not undocumented


@pytest.mark.parametrize("function,index,example", examples())
def test_documented_example(sql, function, index, example):
    assert sql(example.sql, example.setup) == example.result


def test_function_reference_is_generated_and_current():
    from tests.conftest import ROOT
    from udfs.docs import render_functions

    page = render_functions()
    assert (ROOT / "docs" / "functions.md").read_text() == page, "run `make docs`"
    assert "### GeoHash" in page and "u4pruydqqvj" in page and "### OutlierMad" in page


def test_names_are_case_insensitive(sql):
    assert one(sql, "SELECT geohash(57.64911, 10.40744, 5), GEOHASH(57.64911, 10.40744, 5)") == ("u4pru", "u4pru")


# -- calendar, against zoneinfo ---------------------------------------------------------------------------


def _epoch(when: dt.datetime) -> int:
    return int(when.timestamp())


@pytest.mark.parametrize("zone", ["UTC", "Asia/Jakarta", "Asia/Kolkata", "America/New_York", "Australia/Adelaide"])
@pytest.mark.parametrize(
    "local", [dt.datetime(2024, 2, 29, 23, 30), dt.datetime(2023, 12, 31, 0, 0), dt.datetime(2026, 3, 8, 12, 0)]
)
def test_calendar_functions_match_zoneinfo_across_month_ends_and_zones(sql, zone, local):
    tz = zoneinfo.ZoneInfo(zone)
    when = local.replace(tzinfo=tz)
    seconds = _epoch(when)
    first = when.replace(day=1, hour=0, minute=0)
    nxt = (first + dt.timedelta(days=32)).replace(day=1)
    last = nxt.replace(tzinfo=None) - dt.timedelta(seconds=1)
    monday = (when - dt.timedelta(days=when.weekday())).replace(hour=0, minute=0)
    sunday_end = (monday.replace(tzinfo=None) + dt.timedelta(days=7)) - dt.timedelta(milliseconds=1)
    row = one(
        sql,
        f"SELECT StartOfMonth({seconds}, '{zone}'), EndOfMonth({seconds}, '{zone}'), "
        f"StartOfWeek({seconds * 1000}, '{zone}'), EndOfWeek({seconds * 1000}, '{zone}'), "
        f"TimeInDate({seconds}, 7, 15, '{zone}')",
    )
    assert row == (
        _epoch(first.replace(tzinfo=None).replace(tzinfo=tz)),
        _epoch(last.replace(tzinfo=tz)),
        _epoch(monday.replace(tzinfo=None).replace(tzinfo=tz)) * 1000,
        round(sunday_end.replace(tzinfo=tz).timestamp() * 1000),
        _epoch(when.replace(hour=7, minute=15)),
    )


NULL_CALLS = {
    "Distance(NULL, 1.0, 2.0, 3.0)": None,
    "GeoHash(1.0, NULL, 5)": None,
    "S2Id(NULL, 1.0, 5)": None,
    "S2AreaInKm2(NULL)": None,
    "StartOfWeek(NULL, 'UTC')": None,
    "EndOfMonth(NULL, 'UTC')": None,
    "TimeInDate(NULL, 1, 2)": None,
    "FormatTimeInZone(NULL, 'UTC', 'yyyy')": None,
    "JsonDelete(NULL, '$.a')": None,
    "JsonUpdate(NULL, '$.a', 1)": None,
    "ByteToString(NULL)": None,
    "ElementAt(CAST(array() AS ARRAY<INT>), 0)": None,
    "MapGet(map('a', 1), CAST(NULL AS STRING))": None,
    "ArrayAggregate(CAST(NULL AS ARRAY<INT>), 'sum', 'Integer')": None,
    "ArrayOperate(CAST(NULL AS ARRAY<INT>), 'sorted', 'Integer')": None,
    "ExponentialMovingAverage(NULL, array(1.0D), TIMESTAMP '2026-01-01 00:00:00', 3.0D, 0.5D)": None,
    "LinearTrend(CAST(array() AS ARRAY<TIMESTAMP>), CAST(array() AS ARRAY<DOUBLE>), "
    "TIMESTAMP '2026-01-01 00:00:00', 3)": 0.0,
    "DartGet('areas.json', NULL, 1)": None,
    "DartContains('cities.json', NULL)": None,
    "size(SelectFields(CAST(array() AS ARRAY<BINARY>), 'dagger.examples.BookingLogMessage', 'order_number'))": 0,
}


@pytest.mark.parametrize("call", list(NULL_CALLS))
def test_null_and_empty_inputs(sql, call):
    assert one(sql, f"SELECT {call}") == NULL_CALLS[call]


def test_calendar_functions_pass_nulls_through(sql):
    assert one(sql, "SELECT StartOfMonth(NULL, 'UTC'), EndOfWeek(NULL, 'UTC'), TimestampFromUnix(NULL)") == (
        None,
        None,
        None,
    )


def test_time_in_date_has_utc_as_default_zone_and_rejects_a_wrong_argument_count(sql):
    from dagger.errors import SqlError

    assert one(sql, "SELECT TimeInDate(0, 1, 2)") == 3720
    with pytest.raises(SqlError, match=r"TimeInDate takes 3 to 4 arguments"):
        sql("SELECT TimeInDate(0)")


# -- geography --------------------------------------------------------------------------------------------


def _haversine(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(a))


@pytest.mark.parametrize("points", [(0, 0, 0, 1), (-6.2, 106.8, 51.5, -0.12), (89.9, 0, -89.9, 180), (10, 10, 10, 10)])
def test_distance_is_the_haversine_distance(sql, points):
    assert one(sql, "SELECT Distance({}, {}, {}, {})".format(*points)) == pytest.approx(_haversine(*points), rel=1e-12)


def test_geohash_published_values_nulls_and_bad_length(sql):
    # Wikipedia's example point and geohash.org's
    assert one(sql, "SELECT GeoHash(57.64911, 10.40744, 11), GeoHash(42.6, -5.6, 5)") == ("u4pruydqqvj", "ezs42")
    assert one(sql, "SELECT GeoHash(NULL, 1.0, 5)") is None
    with pytest.raises(Exception, match=r"GeoHash: length must be between 1 and 12, got 13"):
        sql("SELECT GeoHash(1.0, 1.0, 13)")


def test_s2_cell_ids_agree_with_the_s2_specification_and_an_independent_library(sql):
    import s2cell

    # face cells (level 0) are (2*face+1) << 60; faces 4 and 5 print negative, as Java longs do
    assert one(sql, "SELECT S2Id(0.0, 0.0, 0), S2Id(-90.0, 0.0, 0)") == (
        str(1 << 60),
        str((11 << 60) - (1 << 64)),
    )
    for lat, lon, level in [(-6.2, 106.8, 13), (40.7128, -74.006, 30), (-33.9, 151.2, 10)]:
        expected = s2cell.lat_lon_to_cell_id(lat, lon, level)
        signed = expected - (1 << 64) if expected >= 1 << 63 else expected
        assert one(sql, f"SELECT S2Id({lat}, {lon}, {level})") == str(signed)
    # a level-30 cell is about 0.74 cm², the level-0 face is 1/6 of the Earth (510072000 km²)
    assert one(sql, f"SELECT S2AreaInKm2('{1 << 60}')") == pytest.approx(510072000 / 6, rel=1e-9)
    with pytest.raises(Exception, match=r"S2AreaInKm2: 'nope' is not an S2 cell id"):
        sql("SELECT S2AreaInKm2('nope')")


# -- JSON ---------------------------------------------------------------------------------------------------


def test_json_path_cases_including_missing_paths_and_invalid_json(sql):
    doc = '{"a":{"b":[1,2,{"c":"x"}]},"n":null}'
    assert one(sql, f"SELECT JsonQuery('{doc}', '$.a.b[2].c')") == '"x"'
    assert one(sql, f"SELECT JsonQuery('{doc}', '$.a.b[?(@.c)]')") == '[{"c":"x"}]'
    assert one(sql, f"SELECT JsonQuery('{doc}', '$.a.zz'), JsonQuery('{doc}', '$.zz.yy')") == (None, None)
    assert one(sql, f"SELECT JsonQuery('{doc}', '$.n'), JsonQuery(NULL, '$.a')") == (None, None)
    assert one(sql, f"SELECT JsonDelete('{doc}', '$.zz')") == doc  # nothing matches: unchanged
    assert one(sql, f"SELECT JsonUpdate('{doc}', '$.a.b[0]', true)") == '{"a":{"b":[true,2,{"c":"x"}]},"n":null}'
    with pytest.raises(Exception, match=r"JsonQuery: input is not valid JSON"):
        sql("SELECT JsonQuery('{not json', '$.a')")
    with pytest.raises(Exception, match=r"JsonQuery: '\$\.\[' is not a valid JSONPath"):
        sql("SELECT JsonQuery('{}', '$.[')")


# -- arrays, maps, strings ---------------------------------------------------------------------------------


def test_array_functions_on_nulls_and_empty_arrays(sql):
    empty = "CAST(array() AS ARRAY<INT>)"
    assert one(
        sql,
        f"SELECT ArrayAggregate({empty}, 'sum', 'Integer'), ArrayAggregate({empty}, 'average', 'Integer'), "
        f"ArrayAggregate({empty}, 'count', 'Integer'), ArrayAggregate({empty}, 'findFirst', 'Other'), "
        f"ArrayAggregate(array(1, NULL, 3), 'max', 'Integer'), ArrayOperate({empty}, 'distinct', 'Integer')",
    ) == (0, None, 0, None, 3, [])
    assert one(sql, "SELECT ArrayAggregate(array(1.5F, 2.5F), 'sum', 'Float')") == 4.0
    assert one(sql, "SELECT ArrayAggregate(array(5000000000, 1), 'sum', 'Long')") == 5000000001
    assert one(
        sql, "SELECT ElementAt(CAST(NULL AS ARRAY<INT>), 0), ListContains(CAST(NULL AS ARRAY<STRING>), 'a')"
    ) == (None, False)
    assert one(sql, "SELECT MapGet(CAST(NULL AS MAP<STRING, INT>), 'a'), Split('', ',')") == (None, [""])
    assert one(sql, "SELECT Split('a1b22c', '[0-9]+'), Split(',a', ',')") == (["a", "b", "c"], ["", "a"])
    with pytest.raises(Exception, match=r"ArrayAggregate: unknown aggregation 'median'"):
        sql("SELECT ArrayAggregate(array(1), 'median', 'Integer')")
    with pytest.raises(Exception, match=r"ArrayAggregate: 'sum' needs a numeric input type"):
        sql("SELECT ArrayAggregate(array('a'), 'sum', 'Other')")
    with pytest.raises(Exception, match=r"ArrayOperate: unknown operation 'reverse'"):
        sql("SELECT ArrayOperate(array(1), 'reverse', 'Integer')")


# -- aggregates and features ------------------------------------------------------------------------------


def test_percentile_matches_commons_math_estimation(sql):
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    setup = "SELECT * FROM VALUES " + ", ".join(f"({v}D)" for v in values) + " AS v(x)"

    def commons(p: float) -> float:  # Apache Commons Math Percentile, default (legacy) estimation
        ordered, n = sorted(values), len(values)
        pos = p * (n + 1) / 100
        if pos < 1:
            return ordered[0]
        if pos >= n:
            return ordered[-1]
        low = ordered[int(math.floor(pos)) - 1]
        return low + (pos - math.floor(pos)) * (ordered[int(math.floor(pos))] - low)

    for p in (5, 30, 40, 50, 100):
        assert sql(f"SELECT PercentileAggregator({p}, x) FROM t", setup) == [(pytest.approx(commons(p)),)]
    with pytest.raises(Exception, match=r"PercentileAggregator: the percentile must be in \(0, 100\], got 0.0"):
        sql("SELECT PercentileAggregator(0, x) FROM t", setup)


def test_feature_rows_take_the_slot_of_the_value_type(sql):
    rows = sql(
        "SELECT f.name, f.value.int32_val, f.value.int64_val, f.value.string_val, f.value.bool_val, "
        "f.value.bytes_val, f.value.timestamp_val.seconds FROM (SELECT explode(Features('i', 7, 'l', 8L, 's', 'x', "
        "'b', true, 'y', X'00FF', 't', TIMESTAMP '2026-01-01 00:00:00')) AS f)"
    )
    assert rows == [
        ("i", 7, None, None, None, None, None),
        ("l", None, 8, None, None, None, None),
        ("s", None, None, "x", None, None, None),
        ("b", None, None, None, True, None, None),
        ("y", None, None, None, None, bytearray(b"\x00\xff"), None),
        ("t", None, None, None, None, None, 1767225600),
    ]
    with pytest.raises(Exception, match=r"unknown feature type 'DateType'"):
        sql("SELECT SingleFeatureWithType('a', 1, 'DateType')")
    with pytest.raises(Exception, match=r"feature 'n': 'abc' is not a IntegerType"):
        sql("SELECT SingleFeatureWithType('n', 'abc', 'IntegerType')")


# -- table functions ---------------------------------------------------------------------------------------


def test_histogram_bucket_in_dagger_lateral_table_syntax(sql):
    rows = sql(
        "SELECT x, bucket FROM VALUES (0.5D), (7.0D), (CAST(NULL AS DOUBLE)) AS v(x), "
        "LATERAL TABLE(HistogramBucket(x, '1,5,10')) AS h(bucket) ORDER BY x NULLS FIRST, bucket"
    )
    assert rows == [(None, "+Inf"), (0.5, "+Inf"), (0.5, "1"), (0.5, "10"), (0.5, "5"), (7.0, "+Inf"), (7.0, "10")]


# -- Longbow+ proto bytes -----------------------------------------------------------------------------------


def test_filters_and_select_fields_decode_with_the_job_descriptors(sql):
    from testing.samples import message_class

    booking = message_class("dagger.examples.BookingLogMessage")
    messages = [booking(order_number=f"o{i}", service_area_id="jakarta" if i % 2 else "bandung") for i in range(5)]
    hexes = ", ".join(f"unhex('{m.SerializeToString().hex()}')" for m in messages)
    setup = f"SELECT array({hexes}) AS msgs"
    rows = sql(
        "SELECT SelectFields(Filters(msgs, 'dagger.examples.BookingLogMessage', CondEq('service_area_id', "
        "'jakarta')), 'order_number') FROM t",
        setup,
    )
    assert rows == [(["o1", "o3"],)]
    with pytest.raises(Exception, match=r"proto message 'no.Such' is not in the job's descriptors"):
        sql("SELECT SelectFields(msgs, 'no.Such', 'a') FROM t", setup)


# -- DARTS ------------------------------------------------------------------------------------------------


def test_dart_get_missing_key_names_collection_and_key_and_cache_is_counted(sql, catalog):
    with pytest.raises(Exception, match=r"DartGet: key 'nowhere' does not exist in collection 'areas.json'"):
        sql("SELECT DartGet('areas.json', 'nowhere', 1)")
    counters = catalog.context.counters
    hits, misses = counters["dart_cache_hit"].value, counters["dart_cache_miss"].value
    rows = sql("SELECT DartGet('areas.json', k, 1) FROM VALUES ('jakarta'), ('bandung'), ('jakarta') AS v(k)")
    assert rows == [("DKI",), ("Jabar",), ("DKI",)]
    # every lookup is counted on the driver (whether it hit depends on which Python worker served it; the
    # cache itself is tested below)
    assert counters["dart_cache_hit"].value + counters["dart_cache_miss"].value == hits + misses + 3
    with pytest.raises(Exception, match=r"DartGet: cannot read collection 'missing.json'"):
        sql("SELECT DartGet('missing.json', 'a', 1)")


def test_dart_files_over_http_and_refresh_after_the_given_hours(spark, tmp_path):
    import pyarrow as pa

    from testing.descriptor_server import DescriptorServer
    from udfs import darts
    from udfs.declare import UdfContext

    write_darts(tmp_path)
    with DescriptorServer(tmp_path) as server:
        context = UdfContext(dart_base=server.url("").rstrip("/"))
        get = darts.dart_get_worker(context)
        args = [pa.array(["areas.json"]), pa.array(["jakarta"]), pa.array([0.0]), pa.array([None], pa.string())]
        assert get(*args, pa.array([False])).to_pylist() == ["DKI"]
        (tmp_path / "dart-get" / "areas.json").write_text(json.dumps({"jakarta": "changed"}))
        # refresh_hours 0: the next call reads the file again
        assert get(*args, pa.array([False])).to_pylist() == ["changed"]
        args[2] = pa.array([1.0])
        (tmp_path / "dart-get" / "areas.json").write_text(json.dumps({"jakarta": "again"}))
        assert get(*args, pa.array([False])).to_pylist() == ["changed"]  # cached for an hour
