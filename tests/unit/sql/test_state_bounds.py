"""Idle-state retention: Dagger drops a key's state after FLINK_RETENTION_IDLE_STATE_MINUTE idle minutes; Spark
cannot, so every operator whose state grows forever is named, with how to bound it, by `dagger validate` and at
start."""

from __future__ import annotations

import pytest
import sqlglot

from dagger.sql.state import unbounded_state


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT customer_id, COUNT(1) FROM s GROUP BY customer_id", ["GROUP BY customer_id keeps a running result"]),
        ("SELECT a, COUNT(1) FROM s GROUP BY a, window(rowtime, '1 minute')", []),
        ("SELECT a, COUNT(1) FROM s GROUP BY a, session_window(rowtime, '1 minute')", []),
        ("SELECT DISTINCT a FROM s", ["SELECT DISTINCT keeps every distinct row forever"]),
        ("SELECT b.x FROM b JOIN c ON b.k = c.k", ["the join with c keeps every row of both sides forever"]),
        (
            "SELECT b.x FROM b JOIN c ON b.k = c.k AND b.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL '5' MINUTE",
            [],
        ),
        ("SELECT b.x FROM b JOIN c ON b.k = c.k AND b.rowtime >= c.rowtime", []),
        ("SELECT x FROM s WHERE y > 1", []),
        ("SELECT x FROM s LATERAL VIEW explode(tags) t AS tag", []),
    ],
)
def test_operators_whose_state_grows_forever_are_named(sql, expected):
    found = unbounded_state(sql)
    assert len(found) == len(expected)
    for sentence, start in zip(found, expected, strict=True):
        assert sentence.startswith(start)


def test_a_join_of_two_streams_without_a_time_bound_gets_daggers_retention_as_one():
    from dagger.sql.rewrite import rewrite_query

    sql = "SELECT b.order_number, c.name FROM bookings b JOIN customers c ON b.customer_id = c.customer_id"
    tables = {"bookings": None, "customers": None}
    bounded = rewrite_query(sql, schemas=tables, retention_minutes=10)
    assert bounded.sql.endswith(
        "ON (b.customer_id = c.customer_id) AND b.rowtime BETWEEN c.rowtime - INTERVAL '10' MINUTE AND c.rowtime + "
        "INTERVAL '10' MINUTE"
    )
    assert bounded.notes[0].startswith("JOIN of b and c has no time bound: rows join within 10 minutes")
    assert unbounded_state(bounded.sql) == []
    assert rewrite_query(sql, schemas=tables, retention_minutes=0).sql == sql  # 0: as written, state forever
    timed = sql + " AND b.rowtime BETWEEN c.rowtime AND c.rowtime + INTERVAL '5' MINUTE"
    assert rewrite_query(timed, schemas=tables, retention_minutes=10).notes == []  # bounded already: untouched


@pytest.mark.parametrize(
    ("sql", "inner", "outer"),
    [
        (
            "SELECT customer_id, COUNT(*) AS n, SUM(x) + 1 AS s FROM t WHERE x > 0 GROUP BY customer_id "
            "HAVING MAX(x) > 2",
            "SELECT customer_id AS __dagger_key0, x AS __dagger_arg0, x AS __dagger_arg1 FROM t WHERE x > 0",
            "SELECT __dagger_key0 AS `customer_id`, __dagger_agg0 AS `n`, __dagger_agg1 + 1 AS `s` FROM v "
            "WHERE __dagger_agg2 > 2",
        ),
        (
            "SELECT upper(c) AS u, avg(x) FROM t GROUP BY u",
            "SELECT UPPER(c) AS __dagger_key0, x AS __dagger_arg0 FROM t",
            "SELECT __dagger_key0 AS `u`, __dagger_agg0 AS `AVG(x)` FROM v",
        ),
        ("SELECT c, COUNT(DISTINCT x) FROM t GROUP BY c", None, None),  # not a running aggregate
        ("SELECT c, collect_list(x) FROM t GROUP BY c", None, None),
        ("SELECT c, x FROM t GROUP BY c", None, None),  # Spark's own error, not ours
        ("SELECT c, COUNT(1) FROM t GROUP BY c, window(rowtime, '1 minute')", None, None),  # the watermark bounds it
        ("SELECT c, n FROM (SELECT c, COUNT(1) AS n FROM t GROUP BY c)", None, None),
    ],
)
def test_a_group_by_is_split_around_its_aggregation_where_a_running_form_exists(sql, inner, outer):
    from dagger.sql.retention import split_grouping

    names = [e.alias or e.sql() for e in sqlglot.parse_one(sql, read="spark").expressions]  # as Spark names them
    found = split_grouping(sql, names, "v")
    if inner is None:
        assert found is None
    else:
        assert (found.inner, found.outer) == (inner, outer)


def test_the_analyses_of_one_query_parse_it_once():
    from dagger.sql.parsed import parsed
    from dagger.sql.retention import split_grouping
    from dagger.sql.rewrite import reads_event_time, referenced_columns
    from dagger.sql.state import unbounded_state

    sql = "SELECT s, COUNT(1) AS n FROM t WHERE amount < 5 GROUP BY s"
    parsed.cache_clear()
    assert referenced_columns(sql) == {"s", "n", "t", "amount"}
    assert reads_event_time(sql)
    assert unbounded_state(sql)
    grouping = split_grouping(sql, ["s", "n"], "v")
    assert grouping is not None and "GROUP BY" not in grouping.inner
    assert parsed.cache_info().misses == 1
    assert split_grouping(sql, ["s", "n"], "v") == grouping  # the shared tree was not changed by the split
    assert parsed("SELECT (") is None and unbounded_state("SELECT (") == [] and referenced_columns("SELECT (") is None
