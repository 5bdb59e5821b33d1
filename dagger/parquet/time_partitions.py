"""Time partitions of Parquet paths (``dt=YYYY-MM-DD[/hr=HH]``) and Dagger's date-range filter.

Pure Python, shared by config validation and the Parquet source:

* :func:`partition_instant` parses the UTC instant of a path with Dagger's regular expression
  ``^.*/dt=(\\d{4}-\\d{2}-\\d{2})/(hr=(\\d{2}))?.*$``;
* :func:`parse_date_ranges` reads ``SOURCE_PARQUET_FILE_DATE_RANGE`` (``START,END[;START,END...]``,
  inclusive, ISO-8601 UTC instants);
* :func:`order_files` applies the range filter and the read order (``EARLIEST_TIME_URL_FIRST``: by path
  instant, then path; ``EARLIEST_INDEX_FIRST``: the configured order).

As in Dagger, a day partition's instant is its midnight, so a range that starts after 00:00:00 skips that
whole day; for hour partitions, ``2022-05-08T00:00:00Z,2022-05-08T10:00:00Z`` keeps hours 00 to 10.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from dagger.config.instants import parse_instant
from dagger.errors import DaggerConfigError

PARTITION_PATTERN = re.compile(r"^.*/dt=(\d{4}-\d{2}-\d{2})/(hr=(\d{2}))?.*$")
RANGE_EXAMPLE = "2022-02-05T00:00:00Z,2022-02-08T23:59:59Z;2022-02-12T00:00:00Z,2022-02-12T23:59:59Z"


@dataclass(frozen=True)
class DateRange:
    """An inclusive UTC range ``[start, end]``."""

    start: dt.datetime
    end: dt.datetime

    def __contains__(self, instant: dt.datetime) -> bool:
        return self.start <= instant <= self.end


def parse_date_ranges(text: str | None, key: str = "SOURCE_PARQUET_FILE_DATE_RANGE") -> list[DateRange]:
    """``START,END[;START,END...]`` → ranges; an empty value means no filter."""
    if text is None or not text.strip():
        return []
    ranges = []
    for i, part in enumerate(p for p in text.split(";") if p.strip()):
        bounds = part.split(",")
        if len(bounds) != 2:
            raise DaggerConfigError(
                f"{key}: range {i + 1} {part.strip()!r} must be START,END (two instants separated by a comma); "
                f"ranges are separated by ';', e.g. {RANGE_EXAMPLE}"
            )
        start = parse_instant(bounds[0], f"{key} range {i + 1} start")
        end = parse_instant(bounds[1], f"{key} range {i + 1} end")
        if start > end:
            raise DaggerConfigError(
                f"{key}: range {i + 1} starts at {start.isoformat()} after it ends at {end.isoformat()}"
            )
        ranges.append(DateRange(start, end))
    return ranges


def partition_instant(path: str) -> dt.datetime | None:
    """The UTC instant of a ``.../dt=YYYY-MM-DD[/hr=HH]/...`` path, or None when it has no such layout."""
    match = PARTITION_PATTERN.match(path)
    if match is None:
        return None
    try:
        day = dt.datetime.strptime(match.group(1), "%Y-%m-%d").replace(tzinfo=dt.UTC)
        hour = int(match.group(3)) if match.group(3) else 0
        if hour > 23:
            return None
    except ValueError:
        return None
    return day + dt.timedelta(hours=hour)


def order_files(
    files: list[str], strategy: str, ranges: list[DateRange], where: str
) -> list[tuple[dt.datetime | None, str]]:
    """Filter ``files`` by ``ranges`` and put them in read order; returns ``(instant, path)`` pairs."""
    if strategy == "EARLIEST_INDEX_FIRST" and not ranges:
        return [(partition_instant(f), f) for f in files]
    dated = []
    for path in files:
        instant = partition_instant(path)
        if instant is None:
            raise DaggerConfigError(
                f"{where}: {path} is not in a dt=YYYY-MM-DD[/hr=HH] partition directory, which "
                f"{'SOURCE_PARQUET_FILE_DATE_RANGE' if ranges else 'the read order EARLIEST_TIME_URL_FIRST'} "
                "needs to place it in time; lay files out as .../dt=2026-11-22/hr=10/part-0.parquet "
                "(hr= optional)"
                + ("" if ranges else ", or set SOURCE_PARQUET_READ_ORDER_STRATEGY=EARLIEST_INDEX_FIRST")
            )
        if not ranges or any(instant in r for r in ranges):
            dated.append((instant, path))
    if strategy == "EARLIEST_INDEX_FIRST":
        return dated
    return sorted(dated, key=lambda item: (item[0], item[1]))
