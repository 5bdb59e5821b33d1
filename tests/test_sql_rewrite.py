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
    assert "WINDOW(rowtime, '5 minutes', '1 minutes').start AS s" in out
    assert "WINDOW_TIME(WINDOW(rowtime, '5 minutes', '1 minutes')) AS r" in out
    assert out.endswith("GROUP BY k, WINDOW(rowtime, '5 minutes', '1 minutes')")


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
