"""Optional dependencies: a clear install hint instead of an ImportError deep inside a Spark task."""

from __future__ import annotations

import importlib.util

from dagger.errors import DaggerConfigError


def require(module: str, extra: str, what: str) -> None:
    """Fail with an install hint when an optional dependency of ``what`` is missing."""

    if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
        raise DaggerConfigError(
            f"{what} needs the {module} package: pip install 'dagger-on-spark[{extra}]' (make install includes it)"
        )
