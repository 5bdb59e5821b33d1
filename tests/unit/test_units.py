"""Fast table tests of pure pieces the integration tests exercise only through whole jobs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagger.kafka.source.reader import split_budget
from dagger.kafka.source.spec import KafkaSourceSpec
from dagger.sinks.rejected import RowsRefused, isolate
from tests.conftest import ROOT


@pytest.mark.parametrize(
    "start, end, budget, expected",
    [
        ({"a": 0, "b": 0}, {"a": 100, "b": 100}, 1000, {"a": 100, "b": 100}),  # within the budget: everything
        ({"a": 0, "b": 0}, {"a": 300, "b": 100}, 100, {"a": 75, "b": 25}),  # in proportion to the backlog
        ({"a": 50, "b": 0}, {"a": 60, "b": 0}, 5, {"a": 55, "b": 0}),  # an empty partition gets nothing
        ({"a": 0, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 1}, 2, {"a": 1, "b": 0, "c": 1}),  # last share, then leftovers
    ],
)
def test_the_read_budget_is_split_by_backlog(start, end, budget, expected):
    capped = split_budget(start, end, budget)
    assert capped == expected
    assert sum(capped[k] - start[k] for k in capped) == min(budget, sum(end[k] - start[k] for k in end))


class Rejected:
    """Collects what isolate() rejects (RejectedRows' ``add`` contract)."""

    def __init__(self):
        self.rows, self.reasons = [], []

    def add(self, rows, reasons, error_types):  # noqa: ANN001, ANN201
        self.rows += rows.column("x").to_pylist()
        self.reasons += [f"{t}: {r}" for r, t in zip(reasons, error_types, strict=True)]


@pytest.mark.parametrize(
    "bad, named, expected_attempts",
    [
        (set(), False, 1),  # nothing refused: one attempt
        ({5}, False, 9),  # one bad row in 16, found by halving: about log2(16) levels
        ({5}, True, 2),  # the destination names the row: reject it, retry the rest
        ({0, 15}, False, 15),  # two bad rows at the ends: two halving paths
    ],
)
def test_isolate_rejects_only_the_refused_rows(bad, named, expected_attempts):
    batch = pa.RecordBatch.from_pydict({"x": list(range(16))})
    written, attempts = [], []

    def attempt(part: pa.RecordBatch) -> None:
        attempts.append(part.num_rows)
        values = part.column("x").to_pylist()
        refused = [i for i, v in enumerate(values) if v in bad]
        if refused:
            raise RowsRefused("INVALID", "no", refused if named else None)
        written.extend(values)

    rejected = Rejected()
    isolate(batch, attempt, rejected)
    assert sorted(written) == [v for v in range(16) if v not in bad]
    assert sorted(rejected.rows) == sorted(bad) and all(r == "INVALID: no" for r in rejected.reasons)
    assert len(attempts) == expected_attempts


def test_a_server_error_rejects_the_part_without_splitting():
    rejected = Rejected()

    def attempt(part: pa.RecordBatch) -> None:
        raise RowsRefused("SINK_5XX_ERROR", "unavailable")

    isolate(pa.RecordBatch.from_pydict({"x": [1, 2, 3, 4]}), attempt, rejected)
    assert rejected.rows == [1, 2, 3, 4]


def test_a_kafka_source_spec_survives_its_option_round_trip():
    spec = KafkaSourceSpec(
        table="t",
        topic_pattern="a|b",
        client_config={"bootstrap.servers": "h:1", "group.id": "g"},
        records={"message": "m.M", "rowtime_source": "event_timestamp", "writers": {"1": ["AAEC"]}},
        invalid_policy="dead-letter",
        dead_letter={"job": "j", "kafka_topic": "dl"},
        aligned_delay_ms=10_000,
        fields=["a", "rowtime"],
        time_range=[1, None],
    )
    assert KafkaSourceSpec.from_option(spec.to_option()) == spec


def test_every_test_that_starts_spark_or_a_server_is_an_integration_test():
    """``pytest -m "not integration"`` is the fast unit layer: it keeps no test that needs Spark or a server."""
    import subprocess
    import sys

    def collected(*args: str) -> set[str]:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
        return {line for line in out.splitlines() if "::" in line}

    units = collected(
        "-m",
        "not integration",
        "tests/unit/session/test_daemon.py",
        "tests/unit/udfs/test_udfs.py",
        "tests/unit/test_units.py",
    )
    assert units, "nothing collected"
    assert not any(
        u.startswith(("tests/unit/session/test_daemon.py::test_workers", "tests/unit/udfs/test_udfs.py::test_doc"))
        for u in units
    )
    assert "tests/unit/session/test_daemon.py::test_the_worker_python_drops_only_the_redundant_zips" in units
    assert any(u.startswith("tests/unit/test_units.py::") for u in units)
