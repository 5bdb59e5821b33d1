"""Instants users write: in a config (``SOURCE_KAFKA_STARTING_TIMESTAMP``, ``SOURCE_PARQUET_FILE_DATE_RANGE``) or on
the command line (``dagger run --from/--to``)."""

from __future__ import annotations

import datetime as dt
import re

from dagger.errors import DaggerConfigError


def parse_instant(text: str, what: str) -> dt.datetime:
    """An ISO-8601 instant (``2026-11-01T00:00:00Z``; no offset means UTC) or epoch milliseconds."""
    value = text.strip()
    if re.fullmatch(r"-?\d{10,}", value):
        return dt.datetime.fromtimestamp(int(value) / 1000, tz=dt.UTC)
    try:
        instant = dt.datetime.fromisoformat(value)
    except ValueError:
        raise DaggerConfigError(
            f"{what}: {text!r} is not an instant; accepted: ISO-8601 such as 2026-11-01T00:00:00Z "
            "(UTC when no offset is given) or epoch milliseconds such as 1761955200000"
        ) from None
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=dt.UTC)
    return instant.astimezone(dt.UTC)
