"""Calendar functions: start/end of week and month, a time of day on the same date, formatting in a zone.

All are Spark SQL functions, inlined into the query plan (no Python). Local dates are computed by shifting
the instant into the zone (``from_utc_timestamp``), truncating, and shifting back (``to_utc_timestamp``), which
needs the session time zone to be UTC — the setting every Dagger on Spark session starts with.
"""

from __future__ import annotations

from udfs.declare import Example, sql_function

# an instant as the wall-clock time of zone `tz` (a timestamp whose UTC fields are the local fields)
_LOCAL_MS = "from_utc_timestamp(timestamp_millis(millis), tz)"
_LOCAL_S = "from_utc_timestamp(timestamp_seconds(seconds), tz)"


@sql_function(
    "StartOfWeek",
    "millis BIGINT, tz STRING",
    "BIGINT",
    examples=[
        Example("SELECT StartOfWeek(1562224758000, 'Asia/Kolkata')", [(1561919400000,)]),
        Example("SELECT StartOfWeek(1562224758000, 'UTC')", [(1561939200000,)]),
    ],
    notes="Dagger's Java Calendar arithmetic returns the Monday of a Sunday-to-Saturday week, so a Sunday maps "
    "to the following Monday; this function uses the ISO Monday-to-Sunday week, which agrees with every case in "
    "Dagger's own tests.",
)
def start_of_week() -> str:
    """Epoch milliseconds of Monday 00:00 of the week (in zone ``tz``) containing ``millis``."""
    return f"unix_millis(to_utc_timestamp(date_trunc('WEEK', {_LOCAL_MS}), tz))"


@sql_function(
    "EndOfWeek",
    "millis BIGINT, tz STRING",
    "BIGINT",
    examples=[
        Example("SELECT EndOfWeek(1562224758000, 'Asia/Jakarta')", [(1562518799999,)]),
        Example("SELECT EndOfWeek(1561939200000, 'UTC')", [(1562543999999,)]),
    ],
    notes="Milliseconds in and out, as Dagger's code does (its docs say seconds). Dagger maps a Sunday to the "
    "end of the next week; this function ends the ISO week the Sunday belongs to.",
)
def end_of_week() -> str:
    """Epoch milliseconds of Sunday 23:59:59.999 (in zone ``tz``) ending the week that contains ``millis``."""
    return (
        f"unix_millis(to_utc_timestamp(date_trunc('WEEK', {_LOCAL_MS}) + INTERVAL 7 DAYS - INTERVAL 1 MILLISECOND, tz))"
    )


@sql_function(
    "StartOfMonth",
    "seconds BIGINT, tz STRING",
    "BIGINT",
    examples=[
        Example("SELECT StartOfMonth(1562224758, 'Asia/Jakarta')", [(1561914000,)]),
        Example("SELECT StartOfMonth(1582934400, 'UTC')", [(1580515200,)]),
    ],
    notes="Dagger's implementation sets DAY_OF_WEEK after the day of month, which moves most dates to a Monday "
    "(its tests only use July 2019, whose 1st is a Monday); this returns the first of the month, as documented.",
)
def start_of_month() -> str:
    """Epoch seconds of the first day of the month, 00:00 in zone ``tz``."""
    return f"unix_seconds(to_utc_timestamp(date_trunc('MONTH', {_LOCAL_S}), tz))"


@sql_function(
    "EndOfMonth",
    "seconds BIGINT, tz STRING",
    "BIGINT",
    examples=[
        Example("SELECT EndOfMonth(1562224758, 'UTC')", [(1564617599,)]),
        Example("SELECT EndOfMonth(1580515200, 'Asia/Kolkata')", [(1583000999,)]),
    ],
)
def end_of_month() -> str:
    """Epoch seconds of the last second (23:59:59) of the month in zone ``tz``; leap years included."""
    return f"unix_seconds(to_utc_timestamp(date_trunc('MONTH', {_LOCAL_S}) + INTERVAL 1 MONTH - INTERVAL 1 SECOND, tz))"


@sql_function(
    "TimeInDate",
    "seconds BIGINT, hour INT, minute INT, tz STRING DEFAULT 'UTC'",
    "BIGINT",
    examples=[
        Example("SELECT TimeInDate(1562224758, 10, 30)", [(1562236200,)]),
        Example("SELECT TimeInDate(1562224758, 10, 30, 'Asia/Jakarta')", [(1562211000,)]),
    ],
)
def time_in_date() -> str:
    """Epoch seconds of ``hour:minute:00`` on the same local date (zone ``tz``, default UTC) as ``seconds``."""
    return f"unix_seconds(to_utc_timestamp(date_trunc('DAY', {_LOCAL_S}) + make_interval(0, 0, 0, 0, hour, minute, 0), tz))"


@sql_function(
    "TimestampFromUnix",
    "seconds BIGINT",
    "TIMESTAMP",
    examples=[Example("SELECT CAST(TimestampFromUnix(1562224758) AS STRING)", [("2019-07-04 07:19:18",)])],
    notes="Negative input is made positive, as Dagger's code does (Math.abs).",
)
def timestamp_from_unix() -> str:
    """The timestamp of epoch ``seconds``."""
    return "timestamp_seconds(abs(seconds))"


@sql_function(
    "FormatTimeInZone",
    "ts TIMESTAMP, tz STRING, format STRING",
    "STRING",
    examples=[
        Example(
            "SELECT FormatTimeInZone(TIMESTAMP '2019-07-04 07:19:18', 'Asia/Kolkata', 'yyyy-MM-dd HH:mm:ss')",
            [("2019-07-04 12:49:18",)],
        ),
        Example(
            "SELECT FormatTimeInZone(TIMESTAMP '2019-07-04 07:19:18', 'Asia/Kolkata', 'hh:mm aa')", [("12:49 PM",)]
        ),
    ],
    notes="Patterns are Java SimpleDateFormat patterns, as in Dagger (``hh:mm aa``, ``EEEEE``): the SQL rewrite "
    "translates a literal pattern where Spark's datetime patterns differ (see docs/sql.md); zone letters (z, Z, X) "
    "print the session zone (UTC), not ``tz``.",
)
def format_time_in_zone() -> str:
    """``ts`` formatted with ``format`` as a wall-clock time in zone ``tz``."""
    return "date_format(from_utc_timestamp(ts, tz), format)"
