"""Which Longbow a query asks for, decided from its output columns exactly as Dagger decides it
(reference/dagger.md §4.8), and whether its columns are fit for it.

Longbow is switched on by column names, not by a config key: it runs when some column of the SQL output matches
``.*\\blongbow.*key\\b.*``, whatever ``PROCESSOR_POSTPROCESSOR_ENABLE`` says. Its kind is then chosen by the key
column, in this order:

============================  ===================================  ==========================================
key column                    needs a column containing            must have no column containing
============================  ===================================  ==========================================
``longbow_key`` (classic)     ``longbow_data``, ``event_timestamp``,  ``proto_data``
                              ``rowtime``
``longbow_write_key`` (plus   ``rowtime``, ``event_timestamp``      ``proto_data``, ``longbow_data``,
writer)                                                              ``longbow_latest``, ``longbow_earliest``,
                                                                     ``longbow_duration``
``longbow_read_key`` (plus    ``event_timestamp``                   ``longbow_data``, ``proto_data``
reader)
============================  ===================================  ==========================================

As in Dagger, "containing" is a substring match (``longbow_data_1`` is a ``longbow_data`` column), and the
classic and reader kinds read a range given either by ``longbow_duration`` (``<n>m``, ``<n>h`` or ``<n>d`` back
from the row's rowtime) or by both ``longbow_earliest`` and ``longbow_latest`` (epoch milliseconds). Beyond
Dagger, giving both forms is refused rather than silently reading the duration, and the columns' types are
checked here instead of failing on the first row: keys and ``longbow_data*`` values are strings (Bigtable
stores them as UTF-8), rowtime a timestamp, the duration a string, the absolute bounds epoch milliseconds or
timestamps. Every violation is a :class:`~dagger.errors.DaggerConfigError` naming the column, raised by
``dagger validate`` and at start alike.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dagger.errors import DaggerConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: Dagger's switch: some output column matches this (``Matcher.find``)
KEY_PATTERN = re.compile(r".*\blongbow.*key\b.*")
DATA = "longbow_data"
PROTO_DATA = "proto_data"
DURATION = "longbow_duration"
EARLIEST = "longbow_earliest"
LATEST = "longbow_latest"
EVENT_TIMESTAMP = "event_timestamp"
ROWTIME = "rowtime"
#: ``<n>m``, ``<n>h`` or ``<n>d``: the form of ``longbow_duration`` and ``PROCESSOR_LONGBOW_DOCUMENT_DURATION``
DURATION_PATTERN = re.compile(r"^(\d+)([mhd])$")
_UNIT_MS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000}


class LongbowKind(enum.Enum):
    """The three kinds of Longbow, each with its key column, the columns it needs and those it refuses."""

    CLASSIC = ("longbow_key", (DATA, EVENT_TIMESTAMP, ROWTIME), (PROTO_DATA,))
    WRITER = ("longbow_write_key", (ROWTIME, EVENT_TIMESTAMP), (PROTO_DATA, DATA, LATEST, EARLIEST, DURATION))
    READER = ("longbow_read_key", (EVENT_TIMESTAMP,), (DATA, PROTO_DATA))

    def __init__(self, key: str, needs: tuple[str, ...], refuses: tuple[str, ...]):
        self.key = key
        self.needs = needs
        self.refuses = refuses

    @property
    def label(self) -> str:
        """Dagger's name of the kind: the key column without ``_key`` (``longbow``, ``longbow_write``, ...)."""
        return self.key.removesuffix("_key")


@dataclass(frozen=True)
class LongbowSchema:
    """A query's Longbow: its kind, the output columns, and how its range is given (``duration``,
    ``absolute``, or None for the writer, which reads nothing)."""

    kind: LongbowKind
    columns: tuple[str, ...]
    range: str | None
    rowtime: str = ROWTIME

    @property
    def key(self) -> str:
        return self.kind.key

    @property
    def data_columns(self) -> list[str]:
        """The ``longbow_data*`` columns, in output order: the history a classic Longbow stores and reads."""
        return [c for c in self.columns if DATA in c]


def duration_ms(text: str, where: str) -> int:
    """``<n>m``, ``<n>h`` or ``<n>d`` in milliseconds; anything else is a :class:`DaggerConfigError` naming
    ``where``."""
    found = DURATION_PATTERN.match(text.strip()) if isinstance(text, str) else None
    if found is None:
        raise DaggerConfigError(
            f"{where}: {text!r} is not a duration; Longbow durations are a whole number of minutes, hours or days "
            "(e.g. 30m, 12h, 90d)"
        )
    return int(found.group(1)) * _UNIT_MS[found.group(2)]


def longbow_schema(columns: Sequence[str], rowtime: str = ROWTIME) -> LongbowSchema | None:
    """The Longbow the output ``columns`` ask for, checked as Dagger checks it; None when no column matches
    Dagger's key pattern. ``rowtime`` is the job's rowtime attribute (``FLINK_ROWTIME_ATTRIBUTE_NAME``; Dagger
    hard-codes ``rowtime``)."""
    columns = tuple(columns)
    keys = [c for c in columns if KEY_PATTERN.search(c)]
    if not keys:
        return None
    kind = next((k for k in LongbowKind if k.key in columns), None)
    listed = ", ".join(columns)
    if kind is None:
        raise DaggerConfigError(
            f"FLINK_SQL_QUERY: column {keys[0]!r} switches Longbow on (Dagger's pattern .*\\blongbow.*key\\b.*) but "
            f"names no kind of it; the key column is longbow_key (Longbow), longbow_write_key (Longbow+ writer) or "
            f"longbow_read_key (Longbow+ reader). Output columns: {listed}"
        )
    needs = [rowtime if n == ROWTIME else n for n in kind.needs]
    missing = [n for n in needs if not any(n in c for c in columns)]
    if missing:
        raise DaggerConfigError(
            f"FLINK_SQL_QUERY: Longbow type {kind.label} ({kind.key}) needs a column named "
            + " and one named ".join(f"*{m}*" for m in missing)
            + f"; output columns: {listed}"
        )
    refused = [(r, c) for r in kind.refuses for c in columns if r in c]
    if refused:
        raise DaggerConfigError(
            f"FLINK_SQL_QUERY: Longbow type {kind.label} ({kind.key}) cannot have column "
            + ", ".join(f"{c!r} (contains {r})" for r, c in refused)
            + f"; output columns: {listed}"
        )
    return LongbowSchema(kind, columns, None if kind is LongbowKind.WRITER else _range(kind, columns), rowtime)


def _range(kind: LongbowKind, columns: tuple[str, ...]) -> str:
    has = {name: name in columns for name in (DURATION, EARLIEST, LATEST)}
    where = f"FLINK_SQL_QUERY: Longbow type {kind.label} ({kind.key})"
    if has[DURATION] and (has[EARLIEST] or has[LATEST]):
        bounds = " and ".join(n for n in (EARLIEST, LATEST) if has[n])
        raise DaggerConfigError(
            f"{where} has both {DURATION} and {bounds}; give the range one way: {DURATION} (e.g. '30d'), or both "
            f"{EARLIEST} and {LATEST}"
        )
    if has[DURATION]:
        return "duration"
    if has[EARLIEST] and has[LATEST]:
        return "absolute"
    if has[EARLIEST] or has[LATEST]:
        given, other = (EARLIEST, LATEST) if has[EARLIEST] else (LATEST, EARLIEST)
        raise DaggerConfigError(f"{where} has {given} without {other}; an absolute range needs both")
    raise DaggerConfigError(
        f"{where} needs its range: a {DURATION} column (e.g. '30d'), or both {EARLIEST} and {LATEST}"
    )


def check_types(schema: LongbowSchema, struct: StructType) -> None:
    """Refuse columns whose type Longbow cannot store or read, naming the column and the cast that fits."""
    from pyspark.sql.types import LongType, StringType, TimestampNTZType, TimestampType

    types = {f.name: f.dataType for f in struct.fields}
    stamp = (TimestampType, TimestampNTZType)
    wanted: dict[str, tuple[tuple[type, ...], str]] = {schema.key: ((StringType,), "STRING")}
    if schema.kind is not LongbowKind.READER:
        wanted[schema.rowtime] = (stamp, "TIMESTAMP")
    for column in schema.data_columns if schema.kind is LongbowKind.CLASSIC else []:
        wanted[column] = ((StringType,), "STRING")
    if schema.range == "duration":
        wanted[DURATION] = ((StringType,), "STRING")
    if schema.range == "absolute":
        wanted[EARLIEST] = wanted[LATEST] = ((LongType, *stamp), "BIGINT (epoch milliseconds) or TIMESTAMP")
    for column, (accepted, name) in wanted.items():
        kind = types.get(column)
        if kind is not None and not isinstance(kind, accepted):
            raise DaggerConfigError(
                f"FLINK_SQL_QUERY: Longbow column {column!r} is {kind.simpleString().upper()}; Longbow needs {name} "
                f"there (CAST(... AS {name.split(' ')[0]}))"
            )
