"""What a case's run produced (:class:`Observed`: each sink's records read back, dead letters, undecodable and
late records, the failure) and whether it is what the case expects (:func:`judge`: the lines of a failed case's
diff). Runs in the ``dagger test`` process, after a case's query ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagger.testing.loading import SINGLE_SINK, expected_key
from dagger.testing.matching import Rules, compare

if TYPE_CHECKING:
    from dagger.config.cases import CaseConfig
    from dagger.job import Job


@dataclass
class Observed:
    """What a case's run produced besides the sinks' records."""

    error: str | None = None
    dead_letters: int = 0
    late: int = 0
    invalid: int = 0
    written: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the case's expected records in the form the sink's records are read back in
    expected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: expected records the sink's own format cannot hold
    problems: list[str] = field(default_factory=list)


def collect(job: Job, case: CaseConfig, observed: Observed) -> None:
    """Into ``observed``: each sink's records read back, and the case's expected ones in the same form."""
    from dagger.testing.decoding import expected_form, written  # start-up: loads pyarrow

    config = job.config
    for sink in job.sinks():
        key = expected_key(config, sink.display_name, case.EXPECTED or {})
        observed.written[key or (SINGLE_SINK if config.SINKS is None else sink.display_name)] = written(sink)
        for i, record in enumerate((case.EXPECTED or {}).get(key, []) if key else []):
            try:
                observed.expected.setdefault(key, []).append(expected_form(sink, record, case.PARTIAL))
            except Exception as exc:  # noqa: BLE001 - each format says it its own way
                observed.problems.append(f"EXPECTED.{key}[{i}] does not fit sink {sink.display_name}'s records: {exc}")


def count(job: Job, observed: Observed) -> None:
    """Into ``observed``: the undecodable and late records the progress of ``job``'s query counted (added to what
    it holds: a run restarted from its checkpoint counts over its queries)."""
    progress = [job.query.lastProgress] if job.bounded else list(job.query.recentProgress or [])
    for p in progress:
        for name, metrics in (p or {}).get("observedMetrics", {}).items():
            if name.startswith("invalid_records_"):
                values = metrics.asDict() if hasattr(metrics, "asDict") else metrics  # a Row while streaming
                observed.invalid += int(values.get("count", 0) or 0)
        for operator in (p or {}).get("stateOperators", []):
            observed.late += int(operator.get("numRowsDroppedByWatermark", 0) or 0)


def dead_letters(directory: str) -> int:
    """How many dead letters the case's run wrote (JSON lines, from the streams and the sinks)."""
    path = Path(directory)
    return sum(len(f.read_text().splitlines()) for f in path.glob("*.jsonl")) if path.is_dir() else 0


def judge(case: CaseConfig, observed: Observed) -> list[str]:
    """Why the case failed (empty: it passed)."""
    if case.EXPECTED_ERROR is not None:
        if observed.error is None:
            return [f"expected a failure with {case.EXPECTED_ERROR!r}; the job ran to its end"]
        if case.EXPECTED_ERROR not in observed.error:
            return [f"expected a failure with {case.EXPECTED_ERROR!r}; it failed with:", f"  {observed.error}"]
        return []
    if observed.error is not None:
        return ["the job failed:", f"  {observed.error}"]
    lines = list(observed.problems)
    for name, records in (case.EXPECTED or {}).items():
        want = observed.expected.get(name, records if not records else [])
        lines += _records_diff(case, name, want, observed.written.get(name, []))
    for what, want, got in (
        ("dead letters", case.EXPECTED_DEAD_LETTERS, observed.dead_letters),
        ("records dropped as late", case.EXPECTED_LATE, observed.late),
        ("undecodable records", case.EXPECTED_INVALID, observed.invalid),
    ):
        if want is not None and want != got:
            lines.append(f"{what}: expected {want}, got {got}")
    return lines


def _records_diff(case: CaseConfig, name: str, expected: list[dict], written: list[dict]) -> list[str]:
    rules = Rules(case.ORDERED, case.PARTIAL, case.TOLERANCE)
    diff = compare(expected, written, rules)
    if diff.ok:
        return []
    return [f"sink {name}: {len(written)} record(s) written, {len(expected)} expected", *diff.lines()]
