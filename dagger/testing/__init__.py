"""``dagger test``: a job's test cases run through the job's own path, with no broker (docs/testing.md).

This package is also a pytest plugin (``pytest -p dagger.testing``, or its ``pytest11`` entry point): with
``--dagger-configs PATTERN`` the cases of the job configs the pattern names are collected as pytest items
(:mod:`dagger.testing.pytest_items`), so a team's CI runs its job tests beside its UDF tests. Without the option
it does nothing; the hooks below import nothing until then.
"""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    """Runs in pytest, once: the plugin's option."""
    parser.getgroup("dagger").addoption(
        "--dagger-configs",
        action="append",
        default=[],
        metavar="PATTERN",
        help="job configs whose TESTS run as pytest items: a path or a glob, relative to the rootdir (repeatable)",
    )


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Runs in pytest, after collection: each named config's cases added as items (before ``-k`` selects)."""
    patterns = config.getoption("dagger_configs", default=[])
    if patterns:
        from dagger.testing.pytest_items import config_items  # cycle: dagger.testing.pytest_items import(s) this module

        items.extend(config_items(session, patterns))


def pytest_sessionfinish(session: Any) -> None:
    """Runs in pytest, at the end: the runs' scratch directories removed."""
    if session.config.getoption("dagger_configs", default=[]):
        from dagger.testing.pytest_items import (
            close_harnesses,  # cycle: dagger.testing.pytest_items import(s) this module
        )

        close_harnesses()
