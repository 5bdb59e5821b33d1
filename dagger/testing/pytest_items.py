"""A job config's test cases as pytest items (runs in pytest's process; loaded by the plugin hooks of
:mod:`dagger.testing` only when ``--dagger-configs`` is given).

Each config is a collector named by its path, each case an item named by its ``NAME``, so ``-k`` selects cases
and the report says ``configs/quickstart.json::counts bookings per area and minute``. Every case of every config
runs in the session's one Spark session; a failing case shows the same diff as ``dagger test``; a case that
cannot run as written (``dagger test``'s exit 2) fails with the reason.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest

from dagger.errors import DaggerConfigError
from dagger.testing.harness import Harness
from dagger.testing.loading import load_cases

_HARNESSES: dict[str, Any] = {}


def config_items(session: pytest.Session, patterns: list[str]) -> list[pytest.Item]:
    """The cases of every config ``patterns`` name (paths or globs, relative to the rootdir)."""
    root = Path(str(session.config.rootpath))
    paths: list[Path] = []
    for pattern in patterns:
        found = sorted(glob.glob(str(root / pattern), recursive=True)) or [str(root / pattern)]
        paths += [Path(p) for p in found if Path(p) not in paths]
    items: list[pytest.Item] = []
    for path in paths:
        items += JobConfigFile.from_parent(session, path=path).collect()
    return items


def close_harnesses() -> None:
    for harness in _HARNESSES.values():
        harness.close()
    _HARNESSES.clear()


class CaseFailed(Exception):
    """A case's diff (or the reason it could not run)."""


class JobConfigFile(pytest.File):
    """A job config: its ``TESTS``."""

    def collect(self) -> list[pytest.Item]:
        try:
            cases = load_cases(str(self.path))
        except DaggerConfigError as exc:
            return [CaseItem.from_parent(self, name="TESTS", case=None, problem=str(exc))]
        return [CaseItem.from_parent(self, name=case.NAME, case=case, problem=None) for case in cases]


class CaseItem(pytest.Item):
    """One case of a job config."""

    def __init__(self, *, case: Any, problem: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.problem = problem

    def runtest(self) -> None:
        if self.problem is not None:
            raise CaseFailed(self.problem)
        key = str(self.path)
        if key not in _HARNESSES:
            _HARNESSES[key] = Harness(key)
        try:
            outcome = _HARNESSES[key].run(self.case)
        except DaggerConfigError as exc:
            raise CaseFailed(f"the case cannot run as written: {exc}") from None
        if not outcome.passed:
            raise CaseFailed("\n".join(outcome.lines))

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return f"case {self.name!r} of {self.path.name} failed:\n{excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.path.name}::{self.name}"
