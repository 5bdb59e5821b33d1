"""Table functions (Python UDTFs): ``SELECT ... FROM t, LATERAL HistogramBucket(...) AS h(bucket)``.

Dagger's ``LATERAL TABLE(f(...))`` is accepted too: the SQL rewrite turns it into Spark's ``LATERAL f(...)``.
"""

from __future__ import annotations

import statistics

from udfs.declare import Example, table_function


@table_function(
    "HistogramBucket",
    "value DOUBLE, buckets STRING",
    "bucket STRING",
    examples=[
        Example(
            "SELECT bucket FROM VALUES (3.0D) AS v(x), LATERAL HistogramBucket(x, '1,5,10') AS h(bucket)",
            [("+Inf",), ("5",), ("10",)],
        )
    ],
    notes="A NULL value emits only ``+Inf`` (Dagger would fail on it).",
)
class HistogramBucket:
    """Prometheus-style cumulative histogram buckets: always ``+Inf``, then every bucket upper bound (from the
    comma-separated ``buckets``) that is at least ``value``."""

    def eval(self, value: float | None, buckets: str):  # noqa: ANN201
        yield ("+Inf",)
        if value is None or buckets is None:
            return
        for bucket in buckets.split(","):
            try:
                bound = float(bucket)
            except ValueError:
                raise ValueError(f"HistogramBucket: bucket {bucket!r} of {buckets!r} is not a number") from None
            if value <= bound:
                yield (bucket,)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _mad(values: list[float]) -> float:
    centre = _median(values)
    return _median([abs(v - centre) for v in values])


@table_function(
    "OutlierMad",
    "vals ARRAY<DOUBLE>, timestamps ARRAY<TIMESTAMP>, window_start TIMESTAMP, window_minutes INT, "
    "observation_minutes INT, tolerance INT, outlier_percentage INT",
    "`timestamp` TIMESTAMP, value DOUBLE, upper_bound DOUBLE, lower_bound DOUBLE, is_outlier BOOLEAN",
    examples=[
        Example(
            "SELECT value, is_outlier FROM VALUES (1) AS v(x), LATERAL OutlierMad("
            "array(8.0D, 10.0D, 11.0D, 9.0D, 12.0D, 50.0D), "
            "transform(sequence(0, 5), i -> TIMESTAMP '2026-01-01 10:00:00' + make_interval(0, 0, 0, 0, 0, i, 0)), "
            "TIMESTAMP '2026-01-01 10:00:00', 6, 2, 3, 50) AS o",
            [(12.0, True), (50.0, True)],
        )
    ],
)
class OutlierMad:
    """Median-absolute-deviation outliers: with the series' median ``m`` and the MADs of the values below and
    above it, a point deviates by ``|v - m| / MAD``; points in the last ``observation_minutes`` of the window
    deviating more than ``tolerance`` are outliers. Emits every observed point with its bounds
    (``m ± tolerance·MAD``) and ``is_outlier`` = outliers are at least ``outlier_percentage`` % of them. A zero
    MAD detects nothing: every observed point is emitted without bounds, as Dagger does."""

    def eval(self, vals, timestamps, window_start, window_minutes, observation_minutes, tolerance, percentage):  # noqa: ANN001, ANN201, PLR0913
        if not vals or timestamps is None or window_start is None:
            return
        import datetime as dt

        points = sorted(zip(timestamps, vals, strict=True), key=lambda p: p[0])
        end = window_start + dt.timedelta(minutes=window_minutes)
        observed_from = end - dt.timedelta(minutes=observation_minutes)
        values = [v for _, v in points]
        centre = _median(values)
        lower = [v for v in values if v <= centre]
        upper = [v for v in values if v >= centre]
        low_mad, high_mad = _mad(lower), _mad(upper)
        observed = [(t, v) for t, v in points if t >= observed_from]
        if not observed:
            return
        if low_mad == 0 or high_mad == 0:
            for t, v in observed:
                yield (t, v, None, None, 0 >= percentage)
            return
        rows, outliers = [], 0
        for t, v in observed:
            mad = low_mad if v <= centre else high_mad
            is_out = abs(v - centre) / mad > tolerance
            outliers += is_out
            rows.append((t, v, centre + tolerance * mad, centre - tolerance * mad))
        flagged = outliers * 100.0 / len(observed) >= percentage
        for t, v, up, down in rows:
            yield (t, v, up, down, flagged)
