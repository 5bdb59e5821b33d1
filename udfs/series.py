"""Per-minute time series inside a hop window: exponential moving average and linear trend.

Vectorized over Arrow batches (one Python call per batch); each row's arrays are small (one value per minute
of the window), so the per-row work is a short loop.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from udfs.declare import Example, arrow_function, rows

_MINUTE_MS = 60_000


def _minutes_since(start: dt.datetime, when: dt.datetime) -> int:
    """Whole minutes from ``start`` to ``when``, truncated toward zero (Java long division)."""
    millis = (when - start) // dt.timedelta(milliseconds=1)
    return int(millis / _MINUTE_MS) if millis >= 0 else -int(-millis / _MINUTE_MS)


_SERIES = (
    "SELECT array(TIMESTAMP '2026-01-01 10:00:00', TIMESTAMP '2026-01-01 10:01:00', "
    "TIMESTAMP '2026-01-01 10:02:00') AS ts, array(1.0D, 2.0D, 4.0D) AS v, TIMESTAMP '2026-01-01 10:00:00' AS hop"
)


@arrow_function(
    "ExponentialMovingAverage",
    "timestamps ARRAY<TIMESTAMP>, vals ARRAY<DOUBLE>, hop_start TIMESTAMP, window_minutes DOUBLE, alpha DOUBLE",
    "DOUBLE",
    examples=[Example("SELECT ExponentialMovingAverage(ts, v, hop, 3.0D, 0.5D) FROM t", [(2.75,)], _SERIES)],
)
def exponential_moving_average(
    timestamps: pa.Array, vals: pa.Array, hop_start: pa.Array, window: pa.Array, alpha: pa.Array
) -> pa.Array:
    """Per-minute EMA of a sparse series: the value of minute ``m`` after ``hop_start`` has position
    ``p = window - 1 - m`` and weight ``alpha·(1-alpha)^p`` (``(1-alpha)^p`` for the oldest position)."""
    out = []
    for ts, values, start, size, a in rows(timestamps, vals, hop_start, window, alpha):
        if ts is None or values is None or start is None or size is None or a is None:
            out.append(None)
            continue
        by_position: dict[float, float] = {}
        for when, value in zip(ts, values, strict=True):
            by_position[size - 1.0 - _minutes_since(start, when)] = float(value)
        total = 0.0
        for position in sorted(by_position):
            weight = (1 - a) ** position if position == size - 1 else a * (1 - a) ** position
            total += by_position[position] * weight
        out.append(total)
    return pa.array(out, pa.float64())


@arrow_function(
    "LinearTrend",
    "timestamps ARRAY<TIMESTAMP>, vals ARRAY<DOUBLE>, hop_start TIMESTAMP, window_minutes INT",
    "DOUBLE",
    examples=[Example("SELECT LinearTrend(ts, v, hop, 3) FROM t", [(1.5,)], _SERIES)],
)
def linear_trend(timestamps: pa.Array, vals: pa.Array, hop_start: pa.Array, window: pa.Array) -> pa.Array:
    """Gradient of the least-squares line through the per-minute series (missing minutes count as 0)."""
    out = []
    for ts, values, start, size in rows(timestamps, vals, hop_start, window):
        if ts is None or values is None or start is None or size is None:
            out.append(None)
            continue
        series = [0.0] * size
        for when, value in zip(ts, values, strict=True):
            minute = _minutes_since(start, when)
            if not 0 <= minute < size:
                raise ValueError(
                    f"LinearTrend: value at {when.isoformat()} is minute {minute} of a {size}-minute window "
                    f"starting {start.isoformat()}"
                )
            series[minute] = float(value)
        xs = [float(i) for i in range(size)]
        covariance = sum(x * y for x, y in zip(xs, series, strict=True)) - sum(xs) * sum(series) / size
        variance = sum(x * x for x in xs) - sum(xs) ** 2 / size
        out.append(covariance / variance if variance else None)
    return pa.array(out, pa.float64())
