"""Dagger's Flink group windows become Spark windows; everything else is left alone."""

import pytest

from dagger.errors import SqlError
from dagger.sql.rewrite import referenced_columns, rewrite_sql


def test_tumble_and_its_end():
    sql = (
        "SELECT count(1) AS c, TUMBLE_END(rowtime, INTERVAL '30' SECOND) AS window_timestamp "
        "FROM `data_stream_0` GROUP BY TUMBLE (rowtime, INTERVAL '30' SECOND)"
    )
    assert rewrite_sql(sql) == (
        "SELECT COUNT(1) AS c, WINDOW(rowtime, '30 seconds').end AS window_timestamp "
        "FROM `data_stream_0` GROUP BY WINDOW(rowtime, '30 seconds')"
    )


def test_hop_swaps_slide_and_size_and_rowtime_uses_window_time():
    sql = (
        "SELECT k, HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS s, "
        "HOP_ROWTIME(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS r "
        "FROM t GROUP BY k, HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)"
    )
    out = rewrite_sql(sql)
    # window_time reads the aggregation's window column, so it is applied in a projection above it
    assert out == (
        "SELECT k, s, WINDOW_TIME(__dagger_window_r) AS r FROM (SELECT k, WINDOW(rowtime, '5 minutes', '1 minutes')"
        ".start AS s, WINDOW(rowtime, '5 minutes', '1 minutes') AS __dagger_window_r FROM t "
        "GROUP BY k, WINDOW(rowtime, '5 minutes', '1 minutes')) AS __dagger_windowed"
    )


def test_queries_without_group_windows_are_untouched():
    sql = (
        "select a.x, b.y from a join b on a.k = b.k and b.rowtime between a.rowtime and a.rowtime + INTERVAL '5' MINUTE"
    )
    assert rewrite_sql(sql) == sql


def test_bad_sql_and_bad_windows_are_clear_errors():
    with pytest.raises(SqlError, match="cannot be parsed"):
        rewrite_sql("SELEC FROM WHERE (")
    with pytest.raises(SqlError, match="TUMBLE takes"):
        rewrite_sql("SELECT 1 FROM t GROUP BY TUMBLE(rowtime)")
    with pytest.raises(SqlError, match="exactly one query"):
        rewrite_sql("SELECT 1; SELECT 2")


def test_referenced_columns():
    assert referenced_columns("SELECT a, b.c FROM t WHERE d > 1") >= {"a", "c", "d"}
    assert referenced_columns("SELECT * FROM t") is None


# -- Flink forms beyond group windows ------------------------------------------------------------------------


def test_simple_date_format_patterns_translate_only_what_spark_refuses():
    from dagger.sql.datetime_patterns import spark_pattern

    assert spark_pattern("hh:mm aa") == "hh:mm a"
    assert spark_pattern("EEEEE, d MMM yyyy") == "EEEE, d MMM yyyy"
    assert spark_pattern("yyyy-MM-dd'T'HH:mm:ss.SSSZ") == "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
    assert spark_pattern("h 'o''clock' a") == "h 'o''clock' a"  # quoted text, a quote inside, untouched
    assert spark_pattern("yyyy-MM-dd HH:mm:ss[.SSS]") == "yyyy-MM-dd HH:mm:ss[.SSS]"  # Spark's optional section
    for letter, hint in (("YYYY", "week-based year"), ("u", "dayofweek"), ("ww", "weekofyear")):
        with pytest.raises(SqlError, match=rf"pattern letter '{letter[0]}' .*{hint}"):
            spark_pattern(letter, "DATE_FORMAT")
    with pytest.raises(SqlError, match="never closed"):
        spark_pattern("yyyy 'at")


def test_patterns_of_every_pattern_function_and_doubled_quotes_in_literals():
    sql = (
        "SELECT DATE_FORMAT(rowtime, 'yyyy-MM-dd''T''HH:mm aa') AS a, TO_TIMESTAMP(s, 'dd/MM/yyyy hh:mm aa') AS b, "
        "FROM_UNIXTIME(n, 'EEEEE') AS c, FormatTimeInZone(rowtime, 'Asia/Kolkata', 'hh:mm aa') AS d FROM t"
    )
    out = rewrite_sql(sql)
    assert "DATE_FORMAT(rowtime, 'yyyy-MM-dd\\'T\\'HH:mm a') AS a" in out
    assert "TO_TIMESTAMP(s, 'dd/MM/yyyy hh:mm a') AS b" in out
    assert "FROM_UNIXTIME(n, 'EEEE') AS c" in out
    assert "FORMATTIMEINZONE(rowtime, 'Asia/Kolkata', 'hh:mm a') AS d" in out


def test_unnest_becomes_the_lateral_view_its_column_type_needs():
    from pyspark.sql.types import ArrayType, IntegerType, MapType, StringType, StructField, StructType

    item = StructType([StructField("id", StringType()), StructField("quantity", IntegerType())])
    schema = StructType(
        [
            StructField("items", ArrayType(item)),
            StructField("tags", ArrayType(StringType())),
            StructField("metadata", MapType(StringType(), StringType())),
        ]
    )
    schemas = {"booking": schema}
    out = rewrite_sql("SELECT i.id FROM booking, UNNEST(booking.items) AS i (id, quantity)", schemas=schemas)
    assert out == "SELECT i.id FROM booking LATERAL VIEW INLINE(booking.items) i AS id, quantity"
    out = rewrite_sql("SELECT t.tag FROM booking b CROSS JOIN UNNEST(b.tags) AS t (tag)", schemas=schemas)
    assert out == "SELECT t.tag FROM booking AS b LATERAL VIEW EXPLODE(b.tags) t AS tag"
    out = rewrite_sql("SELECT m.k FROM booking LEFT JOIN UNNEST(metadata) AS m (k, v) ON TRUE", schemas=schemas)
    assert out == "SELECT m.k FROM booking LATERAL VIEW OUTER EXPLODE(metadata) m AS k, v"
    # without the table's schema: two columns named key and value are a map, more columns an array of rows
    assert "EXPLODE(x.m) kv AS `key`, `value`" in rewrite_sql("SELECT 1 FROM x, UNNEST(x.m) AS kv (`key`, `value`)")
    assert "INLINE(x.a) r AS p, q" in rewrite_sql("SELECT 1 FROM x, UNNEST(x.a) AS r (p, q)")
    with pytest.raises(SqlError, match="WITH ORDINALITY is not supported.*POSEXPLODE"):
        rewrite_sql("SELECT 1 FROM x, UNNEST(x.a) WITH ORDINALITY AS r (p, n)")


def test_a_join_without_an_equality_gets_a_constant_key_and_says_so():
    from dagger.sql.rewrite import rewrite_query

    result = rewrite_query("SELECT * FROM a JOIN b ON b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '1' MINUTE")
    assert result.sql == (
        "SELECT * EXCEPT (__dagger_join_key_a, __dagger_join_key_b) FROM (SELECT *, 0 AS __dagger_join_key_a FROM a) "
        "AS a JOIN (SELECT *, 0 AS __dagger_join_key_b FROM b) AS b ON a.__dagger_join_key_a = b.__dagger_join_key_b "
        "AND (b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '1' MINUTE)"
    )
    (note,) = result.notes
    assert "JOIN of a and b has no equality condition" in note and "one partition" in note
    keyed = (
        "SELECT a.x FROM a JOIN b ON a.id = b.id AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '1' MINUTE"
    )
    assert rewrite_query(keyed).sql == keyed and rewrite_query(keyed).notes == []
    # the pruning of input columns looks through the key wrappers
    assert referenced_columns(result.sql) is None
    assert "x" in referenced_columns(rewrite_query(keyed.replace("a.id = b.id AND ", "")).sql)


def test_flink_constructs_without_a_spark_form_are_clear_errors():
    with pytest.raises(SqlError, match=r"window table-valued function TABLE\(TUMBLE.*GROUP BY TUMBLE"):
        rewrite_sql("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE))")
    with pytest.raises(SqlError, match="MATCH_RECOGNIZE .* has no Spark SQL equivalent"):
        rewrite_sql("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY a ORDER BY rowtime PATTERN (A) DEFINE A AS a > 0)")
    with pytest.raises(SqlError, match=r"FOR SYSTEM_TIME AS OF.*external_source"):
        rewrite_sql("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.proctime ON o.k = r.k")
    with pytest.raises(SqlError, match="a \\*_ROWTIME call must be a select item of its own"):
        rewrite_sql(
            "SELECT CAST(TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS STRING) FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)"
        )


def test_a_users_function_of_a_flink_name_wins_over_the_mapping():
    assert rewrite_sql("SELECT SPLIT_INDEX(s, ',', 1) FROM t", {"SPLIT_INDEX": lambda args: "my_split(1)"}) == (
        "SELECT MY_SPLIT(1) FROM t"
    )


FLINK_RESULTS = [  # Flink's documented results, computed by Spark through the mapping
    ("SPLIT_INDEX('a|b|c', '|', 1)", "b"),
    ("SPLIT_INDEX('a.b', '.', 5)", None),
    ("SPLIT_INDEX('a,b', ',', -1)", None),
    ("SPLIT_INDEX('a,,b,', ',', 3)", ""),
    ("TRUNCATE(-1.239, 2)", -1.23),
    ("TRUNCATE(1.239, 2)", 1.23),
    ("TRUNCATE(7.9)", 7),
    ("IS_DIGIT('123')", True),
    ("IS_DIGIT('12a')", False),
    ("IS_DIGIT(CAST(NULL AS STRING))", False),
    ("IS_ALPHA('abcΩ')", True),
    ("IS_ALPHA('ab1')", False),
    ("IS_DECIMAL('-1.5e3')", True),
    ("IS_DECIMAL('x')", False),
    ("TO_BASE64('abc')", "YWJj"),
    ("FROM_BASE64('YWJj')", "abc"),
    ("SHA256('a')", "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"),
    ("CONVERT_TZ('2020-01-01 00:00:00', 'UTC', 'Asia/Kolkata')", "2020-01-01 05:30:00"),
    ("CAST(TO_TIMESTAMP_LTZ(1577836800123, 3) AS STRING)", "2020-01-01 00:00:00.123"),
    ("CAST(TO_TIMESTAMP_LTZ(1577836800, 0) AS STRING)", "2020-01-01 00:00:00"),
    ("ELEMENT(array(7))", 7),
    ("ELEMENT(array())", None),
    ("RAND_INTEGER(10) BETWEEN 0 AND 9", True),
    ("PROCTIME() IS NOT NULL", True),
    ("CAST(FLOOR(TIMESTAMP '2020-01-01 10:17:05' TO HOUR) AS STRING)", "2020-01-01 10:00:00"),
    ("CAST(CEIL(TIMESTAMP '2020-01-01 10:17:05' TO DAY) AS STRING)", "2020-01-02 00:00:00"),
    ("CAST(CEIL(TIMESTAMP '2020-01-01 00:00:00' TO DAY) AS STRING)", "2020-01-01 00:00:00"),
    ("DATE_FORMAT(TIMESTAMP '2019-07-04 13:19:18', 'hh:mm aa')", "01:19 PM"),
    ("DATE_FORMAT(TIMESTAMP '2019-07-04 13:19:18', 'yyyy-MM-dd''T''HH:mm')", "2019-07-04T13:19"),
    ("FormatTimeInZone(TIMESTAMP '2019-07-04 07:19:18', 'Asia/Kolkata', 'hh:mm aa')", "12:49 PM"),
    ("FormatTimeInZone(TIMESTAMP '2019-07-04 07:19:18', 'Asia/Kolkata', 'EEEEE')", "Thursday"),
    ("UNIX_TIMESTAMP('04/07/2019 01:19 PM', 'dd/MM/yyyy hh:mm aa')", 1562246340),
    ("CHAR_LENGTH('héllo')", 5),
    ("CAST(12 AS VARCHAR)", "12"),
]


def test_flink_functions_give_flinks_results(spark):
    from dagger.functions import build_catalog

    class Config:
        FUNCTION_FACTORY_CLASSES: list = []

    macros = build_catalog(Config()).macros
    query = "SELECT " + ", ".join(f"{sql} AS c{i}" for i, (sql, _) in enumerate(FLINK_RESULTS))
    (row,) = spark.sql(rewrite_sql(query, macros)).collect()
    got = [float(v) if hasattr(v, "is_nan") else v for v in row]  # DECIMAL results
    assert dict(zip([s for s, _ in FLINK_RESULTS], got, strict=True)) == {s: want for s, want in FLINK_RESULTS}


def test_the_docs_list_every_mapped_flink_function():
    from pathlib import Path

    from dagger.sql.flink_functions import markdown_table

    docs = (Path(__file__).resolve().parents[3] / "docs" / "sql.md").read_text()
    assert markdown_table() in docs, "docs/sql.md is out of date: paste dagger.sql.flink_functions.markdown_table()"


def test_which_queries_read_event_time():
    from dagger.sql.rewrite import reads_event_time

    assert not reads_event_time("SELECT a, b.c FROM t WHERE d > 1")
    assert not reads_event_time("SELECT x.v FROM t LATERAL VIEW EXPLODE(t.arr) x AS v")
    for sql in (
        "SELECT count(1) FROM t GROUP BY window(rowtime, '1 minutes')",
        "SELECT a.x FROM a JOIN b ON a.k = b.k",
        "SELECT DISTINCT a FROM t",
        "SELECT max(a) FROM t",
        "SELECT row_number() OVER (PARTITION BY a ORDER BY rowtime) FROM t",
    ):
        assert reads_event_time(sql), sql


def _timestamp_schemas():  # noqa: ANN202
    from pyspark.sql.types import LongType, StructField, StructType, TimestampType

    location = StructType([StructField("time", TimestampType()), StructField("seconds", LongType())])
    return {
        "data_stream_0": StructType(
            [
                StructField("event_timestamp", TimestampType()),
                StructField("pickup", location),
                StructField("n", LongType()),
            ]
        )
    }


def test_dagger_reads_a_timestamps_seconds_and_nanos_and_so_can_it_here():
    out = rewrite_sql(
        "SELECT event_timestamp.seconds, t.event_timestamp.nanos AS n2, pickup.time.seconds, pickup.seconds "
        "FROM data_stream_0 AS t WHERE event_timestamp.seconds > 5",
        schemas=_timestamp_schemas(),
    )
    assert out == (
        "SELECT CAST(FLOOR(UNIX_MICROS(event_timestamp) / 1000000) AS BIGINT) AS seconds, "
        "CAST(PMOD(UNIX_MICROS(t.event_timestamp), 1000000) * 1000 AS INT) AS n2, "
        "CAST(FLOOR(UNIX_MICROS(pickup.time) / 1000000) AS BIGINT) AS seconds, pickup.seconds "  # a BIGINT field
        "FROM data_stream_0 AS t WHERE CAST(FLOOR(UNIX_MICROS(event_timestamp) / 1000000) AS BIGINT) > 5"
    )
    # without the schemas (or for a column of another type) nothing is guessed
    assert rewrite_sql("SELECT event_timestamp.seconds FROM data_stream_0") == (
        "SELECT event_timestamp.seconds FROM data_stream_0"
    )
    assert rewrite_sql("SELECT n.seconds FROM data_stream_0", schemas=_timestamp_schemas()) == (
        "SELECT n.seconds FROM data_stream_0"
    )


def test_a_timestamps_seconds_and_nanos_are_protobufs_own(spark):
    """Before 1970 too: protobuf rounds seconds down and keeps nanos positive."""
    import datetime as dt

    from google.protobuf.timestamp_pb2 import Timestamp
    from pyspark.sql.types import StructField, StructType, TimestampType

    instants = [
        dt.datetime(2026, 11, 25, 7, 19, 21, 123456, tzinfo=dt.UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 250000, tzinfo=dt.UTC),
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    ]
    schema = StructType([StructField("event_timestamp", TimestampType())])
    spark.createDataFrame([(i,) for i in instants], schema).createOrReplaceTempView("stamps")
    sql = rewrite_sql("SELECT event_timestamp.seconds, event_timestamp.nanos FROM stamps", schemas={"stamps": schema})
    got = [(r["seconds"], r["nanos"]) for r in spark.sql(sql).collect()]
    expected = []
    for instant in instants:
        stamp = Timestamp()
        stamp.FromDatetime(instant)
        expected.append((stamp.seconds, stamp.nanos))
    assert got == expected
    assert expected[1] == (-1, 250_000_000)
