"""Java ``SimpleDateFormat`` patterns (what Dagger and Flink SQL take) → Spark datetime patterns.

Spark 3+ formats and parses with ``java.time`` patterns, which agree with ``SimpleDateFormat`` on the usual
letters (``y M d H h m s SSS E z Z X``) and quoting rules, but refuse some patterns Dagger users write every day
(``hh:mm aa``: "Too many pattern letters: a"). The translation changes only what Spark would refuse, so a pattern
that is valid in both keeps Spark's meaning and a Spark user's pattern is never altered:

==============  ==================================  ===========================================================
SimpleDateFormat  meaning                             Spark
==============  ==================================  ===========================================================
``a``, ``aa``…    AM/PM marker                        ``a``
``EEEEE``…        day name in full (4+ letters)       ``EEEE``
``u``             day number of week (1 = Monday)     none: an error that suggests ``dayofweek`` / ``weekday``
``Y``             week-based year                     none: an error that suggests ``yyyy`` (calendar year)
``w``, ``W``      week in year / month                none: an error that suggests ``weekofyear``
==============  ==================================  ===========================================================

Quoted text (``'T'``, ``'at'``, ``''``) is copied as it is: both formats quote the same way.

:data:`PATTERN_ARGUMENT` lists the functions whose pattern argument is translated, when it is a literal (a
pattern computed at run time reaches Spark unchanged).
"""

from __future__ import annotations

from dagger.errors import SqlError

#: upper-cased function name → index of its pattern argument
PATTERN_ARGUMENT: dict[str, int] = {
    "DATE_FORMAT": 1,
    "TO_TIMESTAMP": 1,
    "TRY_TO_TIMESTAMP": 1,
    "TO_DATE": 1,
    "UNIX_TIMESTAMP": 1,
    "TO_UNIX_TIMESTAMP": 1,
    "FROM_UNIXTIME": 1,
    "FORMATTIMEINZONE": 2,
}

_NO_SPARK_EQUIVALENT = {
    "u": "day number of week; use dayofweek(ts) (1 = Sunday) or weekday(ts) + 1 (1 = Monday)",
    "Y": "week-based year; use 'yyyy' (the calendar year, which differs only in the first and last days of a year)",
    "w": "week in year; use weekofyear(ts)",
    "W": "week in month; compute it from dayofmonth(ts)",
}


def spark_pattern(java: str, where: str = "pattern") -> str:
    """The Spark pattern for the ``SimpleDateFormat`` pattern ``java``.

    ``where`` names the call in error messages (``DATE_FORMAT(...)``). Raises :class:`SqlError` for a letter
    Spark has no equivalent of, or an unterminated quote.
    """
    out: list[str] = []
    i, n = 0, len(java)
    while i < n:
        char = java[i]
        if char == "'":
            end = _closing_quote(java, i, where)
            out.append(java[i : end + 1])
            i = end + 1
            continue
        if not (char.isascii() and char.isalpha()):
            out.append(char)
            i += 1
            continue
        end = i
        while end < n and java[end] == char:
            end += 1
        out.append(_letters(char, end - i, java, where))
        i = end
    return "".join(out)


def _closing_quote(java: str, start: int, where: str) -> int:
    """Index of the quote that closes the one at ``start`` (``''`` inside quotes is a literal quote)."""
    j = start + 1
    while j < len(java):
        if java[j] == "'":
            if j + 1 < len(java) and java[j + 1] == "'" and j != start + 1:
                j += 2
                continue
            return j
        j += 1
    raise SqlError(f"{where}: the pattern {java!r} has a quote that is never closed; write '' for a literal quote")


def _letters(char: str, count: int, java: str, where: str) -> str:
    if char in _NO_SPARK_EQUIVALENT:
        raise SqlError(
            f"{where}: pattern letter '{char}' in {java!r} ({_NO_SPARK_EQUIVALENT[char]}) has no Spark equivalent"
        )
    if char == "a":
        return "a"
    if char == "E" and count > 4:
        return "EEEE"
    return char * count
