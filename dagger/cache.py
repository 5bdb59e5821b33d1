"""Where Dagger keeps what it builds once per machine and reuses across runs: the Kafka C helper
(:mod:`dagger.kafka.native`), Spark's class-data archive (:mod:`dagger.session.class_data`) and the connector jars
(:mod:`dagger.session.jars`). Standard library only: the bench's peers' set-up imports it too."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where built helpers live: ``DAGGER_NATIVE_CACHE``, default ``~/.cache/dagger-on-spark``."""
    return Path(os.environ.get("DAGGER_NATIVE_CACHE", Path.home() / ".cache" / "dagger-on-spark"))
