"""Longbow as a user meets it: ``dagger validate`` and ``dagger run`` of Longbow SQL (reference/dagger.md §4.8)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import dagger, job, kafka_stream

pytestmark = pytest.mark.integration

CLASSIC_SQL = (
    "SELECT customer_id AS longbow_key, order_number AS longbow_data1, event_timestamp, rowtime, "
    "'30d' AS longbow_duration FROM data_stream_0"
)


def test_validate_names_the_longbow_kind_and_refuses_a_misfit_column(broker, stencil, topic, tmp_path):
    streams = [kafka_stream(broker, topic("longbow-validate"))]
    good = job(stencil, streams, CLASSIC_SQL)
    (tmp_path / "good.json").write_text(json.dumps(good))
    result = dagger("validate", str(tmp_path / "good.json"))
    assert result.returncode == 0, result.stderr
    assert "longbow: longbow (longbow_key), its range from longbow_duration" in result.stdout
    # a number where Longbow stores strings: refused before anything runs, naming the column and the cast
    bad = dict(good, FLINK_SQL_QUERY=CLASSIC_SQL.replace("order_number AS", "amount_paid_by_cash AS"))
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    result = dagger("validate", str(tmp_path / "bad.json"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Longbow column 'longbow_data1' is BIGINT; Longbow needs STRING there" in result.stderr
    both = dict(good, FLINK_SQL_QUERY=CLASSIC_SQL.replace("FROM", ", 0 AS longbow_latest FROM"))
    (tmp_path / "both.json").write_text(json.dumps(both))
    result = dagger("validate", str(tmp_path / "both.json"))
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "has both longbow_duration and longbow_latest; give the range one way: longbow_duration (e.g. '30d'), or "
            "both longbow_earliest and longbow_latest"
        )
    )
