"""The restore check's verdict (dagger.testing.harness.Harness._restore_check): the two reruns' records and
counts against the uninterrupted run's. The runs themselves are given (the end-to-end check, with a job whose
state breaks on a restart, is tests/integration/testing/test_command.py)."""

from __future__ import annotations

from dagger.config.cases import CaseConfig
from dagger.testing.harness import Harness
from dagger.testing.verdict import Observed

RECORDS = [{"area": "jakarta", "count": 2}]
CASE = CaseConfig(
    NAME="late",
    MODE="streaming",
    INPUT_BATCHES=[{"bookings": [{"id": 1}, {"id": 2}]}, {"bookings": [{"id": 3}]}],
    EXPECTED={"SINK": RECORDS},
)


def verdict(restarted: Observed, single: Observed) -> list[str]:
    """The restore check's lines when the restarted run observed ``restarted`` and the one of single-record
    batches ``single``."""
    harness = Harness("unused.json")
    runs = []

    def observe(config, case, directory, batches, fresh_workers=False, restarts=False):
        runs.append((batches, fresh_workers, restarts))
        return restarted if restarts else single

    harness._observe = observe
    try:
        whole = Observed(late=1, invalid=1, dead_letters=1, written={"SINK": list(RECORDS)})
        lines = harness._restore_check(None, CASE, CASE.INPUT_BATCHES, whole)
    finally:
        harness.close()
    assert runs == [  # the same batches restarted after each, then one record per batch; both in fresh workers
        (CASE.INPUT_BATCHES, True, True),
        ([{"bookings": [{"id": 1}]}, {"bookings": [{"id": 2}]}, {"bookings": [{"id": 3}]}], True, False),
    ]
    return lines


def test_the_same_records_and_counts_pass():
    same = Observed(late=1, invalid=1, dead_letters=1, written={"SINK": list(RECORDS)})
    assert verdict(same, same) == []


def test_other_counts_after_a_restart_fail_the_check_naming_each():
    restarted = Observed(late=0, invalid=1, dead_letters=2, written={"SINK": list(RECORDS)})
    single = Observed(late=0, invalid=1, dead_letters=1, written={"SINK": list(RECORDS)})
    assert verdict(restarted, single) == [
        "restore check: run stopped after every micro-batch and restarted from its checkpoint, dead letters: "
        "in one run 1, now 2",
        "restore check: run stopped after every micro-batch and restarted from its checkpoint, late records: "
        "in one run 1, now 0",
    ]  # records read one by one may be late where a batch of them was not: their windows' output tells


def test_other_records_fail_the_check_with_the_difference():
    other = Observed(late=1, invalid=1, dead_letters=1, written={"SINK": [{"area": "jakarta", "count": 3}]})
    lines = verdict(Observed(late=1, invalid=1, dead_letters=1, written={"SINK": list(RECORDS)}), other)
    assert (
        lines[0]
        == "restore check: run with every record in a micro-batch of its own, sink SINK wrote other records than in one run:"
    )
    assert any("count: in one run 2, now 3" in line for line in lines), lines
