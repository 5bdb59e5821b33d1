"""Which stored rows each row of a batch reads: its key's rows from its rowtime back over its range, as row-key
ranges (Bigtable's rows of a key sort most recent first, :func:`dagger.longbow.bigtable.row_key`)."""

from __future__ import annotations

from typing import Any

from dagger.longbow.bigtable import row_key
from dagger.longbow.schema import DURATION, EARLIEST, LATEST, duration_ms


def millis(column: Any) -> list[int | None]:
    """A timestamp (µs) or epoch-millisecond column as epoch milliseconds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(column.type):
        micros = pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())
        return pc.floor(pc.divide(pc.cast(micros, pa.float64()), 1000.0)).cast(pa.int64()).to_pylist()
    return pc.cast(column, pa.int64()).to_pylist()


def scan_ranges(
    batch: Any, kind: str, keys: list, rowtimes: list, own: list, durations: dict[str, int]
) -> list[tuple[bytes, bytes] | None]:
    """Each row's inclusive scan (None: nothing to read): with ``kind`` ``duration``, from its own row key
    ``own[i]`` back over its ``longbow_duration`` (parsed once per distinct value into ``durations``); with
    ``absolute``, from the key at ``longbow_latest`` back to the key at ``longbow_earliest``."""
    ranges: list[tuple[bytes, bytes] | None] = [None] * batch.num_rows
    if kind == "duration":
        texts = batch.column(DURATION).to_pylist()
        for i, text in enumerate(texts):
            if own[i] is None or text is None:
                continue
            if text not in durations:
                durations[text] = duration_ms(text, f"{DURATION} of a row (key {keys[i]!r})")
            ranges[i] = (own[i], row_key(keys[i], rowtimes[i] - durations[text]))
        return ranges
    earliest, latest = millis(batch.column(EARLIEST)), millis(batch.column(LATEST))
    for i in range(batch.num_rows):
        if keys[i] is None or earliest[i] is None or latest[i] is None or earliest[i] > latest[i]:
            continue
        ranges[i] = (row_key(keys[i], latest[i]), row_key(keys[i], earliest[i]))
    return ranges
