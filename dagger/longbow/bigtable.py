"""Longbow's Bigtable store, in Dagger's layout: rows written by one job are read by the other.

* **Row key** ``<key>#<Long.MAX_VALUE − rowtime_ms>`` (UTF-8): a key's rows sort most recent first, so a scan from
  the key of a row's rowtime to the key of its rowtime minus the range reads its history newest first.
* **Cells** in column family ``ts``, one per ``longbow_data*`` column (the column name as qualifier, the value as
  UTF-8), cell timestamp = rowtime.
* **Table** ``PROCESSOR_LONGBOW_GCP_TABLE_ID`` (default ``FLINK_JOB_ID``) in ``PROCESSOR_LONGBOW_GCP_PROJECT_ID`` /
  ``PROCESSOR_LONGBOW_GCP_INSTANCE_ID``, created when missing with the GC rule max-versions 1 ∪ max-age
  ``PROCESSOR_LONGBOW_DOCUMENT_DURATION`` (:func:`ensure_table`, on the driver before the query starts).

The executors talk to Bigtable's data API directly over gRPC with the client library's own protobuf messages
(:class:`BigtableStore`): a micro-batch's Arrow batch of rows is one ``MutateRows`` call for the writes and one
``ReadRows`` call per slice of rows for the reads, every row's range in one row set, the answer split among the
rows by key. The library's data client builds Python objects per row and cell and merges a response chunk by
chunk in Python: on the emulator here it wrote 3,300 rows/s and read 1,400 rows/s where the same messages sent
as they are went 90,000 and 10,000 rows/s. ``BIGTABLE_EMULATOR_HOST`` selects an emulator (no credentials, as
the library does): the driver's, shipped with the job (executors of a local job do not see a variable set after
the session started), else the executor's. Otherwise the channel carries the application default credentials.

One module (~310 lines) because it is one client: Bigtable's table set-up, reads and writes with their
credentials and timeouts.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dagger.errors import DaggerError
from dagger.longbow.memory import MemoryStore

FAMILY = "ts"
MAX_LONG = 2**63 - 1
EMULATOR_ENV = "BIGTABLE_EMULATOR_HOST"
ENDPOINT = "bigtable.googleapis.com:443"
SCOPE = "https://www.googleapis.com/auth/bigtable.data"
#: rows per ``ReadRows`` call: one row set of this many ranges (a request well under gRPC's 4 MiB)
READ_SLICE = 1000
#: gRPC's ``SingleThreadedUnaryStream`` (``grpc.experimental.ChannelOptions``): a ``ReadRows``/``MutateRows`` stream
#: is read on the calling thread instead of being handed over from the channel's polling thread message by message.
#: The emulator answers one message per stored row; with the hand-over a read cost 3,744 reads per CPU-second of
#: the executor, without it 10,261 (``make bench-longbow``)
CHANNEL_OPTIONS = [("SingleThreadedUnaryStream", 1)]


class LongbowTimeoutError(DaggerError):
    """A Bigtable call took longer than ``PROCESSOR_LONGBOW_ASYNC_TIMEOUT``: fatal, as in Dagger."""


class LongbowTableError(DaggerError):
    """The Longbow table could not be checked or created: fatal, as in Dagger."""


@dataclass(frozen=True)
class TableName:
    """Where Longbow's rows live."""

    project: str
    instance: str
    table: str

    @property
    def path(self) -> str:
        return f"projects/{self.project}/instances/{self.instance}/tables/{self.table}"


def row_key(key: str, rowtime_ms: int) -> bytes:
    """Dagger's row key of ``key`` at ``rowtime_ms``."""
    return f"{key}#{MAX_LONG - rowtime_ms}".encode()


def ensure_table(name: TableName, max_age_ms: int, timeout_s: float = 15.0) -> bool:
    """Create the table with Dagger's GC rule unless it exists; returns whether it was created. Each admin call
    gives up after ``timeout_s`` (``PROCESSOR_LONGBOW_ASYNC_TIMEOUT``); any failure is a
    :class:`LongbowTableError` naming the table and where it was looked for (the job cannot keep its history
    without it)."""

    from google.api_core import exceptions
    from google.api_core.retry import Retry
    from google.cloud import bigtable
    from google.cloud.bigtable import column_family

    where = os.environ.get(EMULATOR_ENV) or ENDPOINT
    retry = Retry(timeout=timeout_s)
    try:
        admin = bigtable.Client(project=name.project, admin=True).table_admin_client
        try:
            admin.get_table(name=name.path, timeout=timeout_s, retry=retry)
            return False
        except exceptions.NotFound:
            pass
        rule = column_family.GCRuleUnion(
            [column_family.MaxVersionsGCRule(1), column_family.MaxAgeGCRule(dt.timedelta(milliseconds=max_age_ms))]
        )
        admin.create_table(
            parent=f"projects/{name.project}/instances/{name.instance}",
            table_id=name.table,
            table={"column_families": {FAMILY: {"gc_rule": rule.to_pb()}}},
            timeout=timeout_s,
        )
        return True
    except exceptions.AlreadyExists:  # another job created it meanwhile
        return False
    except Exception as exc:  # noqa: BLE001 - google-api-core, grpc and auth errors alike: one message
        last = getattr(exc, "cause", None) or exc  # a RetryError holds the last failure
        cause = getattr(last, "message", None) or str(last)
        raise LongbowTableError(
            f"Longbow cannot check or create its Bigtable table {name.path} at {where} within "
            f"{timeout_s:g} s (PROCESSOR_LONGBOW_ASYNC_TIMEOUT): {type(last).__name__}: {cause.splitlines()[0]}"
        ) from None


class BigtableStore:
    """Executor side: writes rows and reads row ranges of one table over one gRPC channel.

    ``timeout_s`` bounds every call (:class:`LongbowTimeoutError` past it); any other failure of a call is returned as
    its error text, for the caller to count, as Dagger counts a failed read or write and lets the row pass. Each
    call's response time is kept in :attr:`timings` as ``(role, outcome, ms)`` (role ``writer`` or ``reader``,
    outcome ``success`` or ``failed``) until :meth:`take_timings`.
    """

    def __init__(self, name: TableName, timeout_s: float, emulator: str | None = None):
        import grpc
        from google.cloud.bigtable_v2.types import bigtable as messages

        self.name = name
        self.timeout_s = timeout_s
        self._read_request = messages.ReadRowsRequest.pb()
        self._mutate_request = messages.MutateRowsRequest.pb()
        emulator = emulator or os.environ.get(EMULATOR_ENV)
        if emulator:
            self.channel = grpc.insecure_channel(emulator, options=CHANNEL_OPTIONS)
        else:
            import google.auth
            import google.auth.transport.grpc
            import google.auth.transport.requests

            credentials, _ = google.auth.default(scopes=[SCOPE])
            self.channel = google.auth.transport.grpc.secure_authorized_channel(
                credentials, google.auth.transport.requests.Request(), ENDPOINT, options=CHANNEL_OPTIONS
            )
        self.timings: list[tuple[str, str, float]] = []
        self._metadata = (("x-goog-request-params", f"table_name={name.path}"),)
        self._mutate = self.channel.unary_stream(
            "/google.bigtable.v2.Bigtable/MutateRows",
            request_serializer=self._mutate_request.SerializeToString,
            response_deserializer=messages.MutateRowsResponse.pb().FromString,
        )
        self._read = self.channel.unary_stream(
            "/google.bigtable.v2.Bigtable/ReadRows",
            request_serializer=self._read_request.SerializeToString,
            response_deserializer=messages.ReadRowsResponse.pb().FromString,
        )

    def write(
        self, keys: Sequence[bytes], micros: Sequence[int], cells: dict[str, Sequence[str | bytes | None]]
    ) -> list[int]:
        """Write row ``keys[i]`` with one cell per ``cells`` qualifier (a string as UTF-8, bytes as they are;
        None: no cell) at ``micros[i]``; returns the indexes of the rows that failed."""
        if not keys:
            return []
        request = self._mutate_request(table_name=self.name.path)
        qualifiers = [(q.encode(), values) for q, values in cells.items()]
        for i, key in enumerate(keys):
            entry = request.entries.add()
            entry.row_key = key
            for qualifier, values in qualifiers:
                value = values[i]
                if value is None:
                    continue
                cell = entry.mutations.add().set_cell
                cell.family_name = FAMILY
                cell.column_qualifier = qualifier
                cell.timestamp_micros = micros[i]
                cell.value = value if isinstance(value, bytes) else value.encode()
        failed: list[int] = []
        began = time.perf_counter()
        try:
            for answer in self._mutate(request, timeout=self.timeout_s, metadata=self._metadata):
                failed.extend(e.index for e in answer.entries if e.status.code != 0)
        except Exception as exc:  # noqa: BLE001 - a grpc.RpcError; a deadline is fatal, the rest counted
            self._timed("writer", "failed", began)
            self._raise_on_deadline(exc, "write")
            return list(range(len(keys)))
        self._timed("writer", "failed" if failed else "success", began)
        return failed

    def scan(self, ranges: Sequence[tuple[bytes, bytes]], qualifiers: Iterable[str]) -> dict[bytes, dict[bytes, bytes]]:
        """Every stored row within one of the inclusive ``ranges``: row key → qualifier → newest value, for the
        ``qualifiers`` of family ``ts``. Raises the call's error (a deadline as :class:`LongbowTimeoutError`)."""
        request = self._read_request(table_name=self.name.path)
        for start, end in ranges:
            span = request.rows.row_ranges.add()
            span.start_key_closed = start
            span.end_key_closed = end
        chain = request.filter.chain.filters
        chain.add().family_name_regex_filter = f"^{FAMILY}$"
        chain.add().column_qualifier_regex_filter = ("^(" + "|".join(re.escape(q) for q in qualifiers) + ")$").encode()
        chain.add().cells_per_column_limit_filter = 1
        rows: dict[bytes, dict[bytes, bytes]] = {}
        key, qualifier, value, cells = b"", b"", b"", {}
        began = time.perf_counter()
        try:
            for answer in self._read(request, timeout=self.timeout_s, metadata=self._metadata):
                for chunk in answer.chunks:  # Bigtable's cell chunks: a row's cells, a value possibly split
                    if chunk.reset_row:
                        cells, value = {}, b""
                        continue
                    if chunk.row_key:
                        key = chunk.row_key
                    if chunk.HasField("qualifier"):
                        qualifier = chunk.qualifier.value
                    value += chunk.value
                    if chunk.value_size == 0:  # the cell's last (or only) chunk
                        cells.setdefault(qualifier, value)
                        value = b""
                    if chunk.commit_row:
                        rows[key] = cells
                        cells = {}
        except Exception as exc:  # noqa: BLE001 - a grpc.RpcError
            self._timed("reader", "failed", began)
            self._raise_on_deadline(exc, "read")
            raise
        self._timed("reader", "success", began)
        return rows

    def _timed(self, role: str, outcome: str, began: float) -> None:
        self.timings.append((role, outcome, (time.perf_counter() - began) * 1000))  # atomic: scans run in threads

    def take_timings(self) -> list[tuple[str, str, float]]:
        """The calls' ``(role, outcome, ms)`` since the last take."""
        taken, self.timings = self.timings, []
        return taken

    def _raise_on_deadline(self, exc: Exception, what: str) -> None:
        import grpc

        if isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise LongbowTimeoutError(
                f"Longbow: a Bigtable {what} of {self.name.path} took longer than PROCESSOR_LONGBOW_ASYNC_TIMEOUT "
                f"({self.timeout_s * 1000:.0f} ms); a timeout stops the job, as in Dagger"
            ) from None

    def close(self) -> None:
        self.channel.close()


def open_store(name: TableName, spec: dict) -> BigtableStore:
    """The store of Longbow's table ``name``: Bigtable, or with ``spec["store"]`` (``dagger test``) the file
    :class:`~dagger.longbow.memory.MemoryStore` keeps it in (the same calls)."""
    if spec.get("store"):
        return MemoryStore(spec["store"], name.path)  # type: ignore[return-value]
    return BigtableStore(name, spec["timeout_s"], spec["emulator"])


def describe_error(exc: Exception) -> str:
    """A failed call in one line: its gRPC status and details, or the exception."""
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {details()}"
    return f"{type(exc).__name__}: {exc}"


def merged(ranges: Sequence[tuple[bytes, bytes] | None]) -> tuple[list[tuple[bytes, bytes]], list[int | None]]:
    """The union of inclusive ``ranges`` as disjoint ranges in key order, and for each input range the index of
    the merged range holding it (None for None). A key's rows in one micro-batch read overlapping histories:
    merged, each stored row is fetched once per batch instead of once per row that reads it."""
    order = sorted((r[0], r[1], i) for i, r in enumerate(ranges) if r is not None)
    spans: list[list[bytes]] = []
    owner: list[int | None] = [None] * len(ranges)
    for start, end, i in order:
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
        owner[i] = len(spans) - 1
    return [(a, b) for a, b in spans], owner


def scan_all(
    store: BigtableStore, ranges: Sequence[tuple[bytes, bytes] | None], qualifiers: list[str], capacity: int
) -> tuple[dict[bytes, dict[bytes, bytes]], list[int], list[str]]:
    """Scan ``ranges`` (None: no range), merged where they overlap (:func:`merged`), :data:`READ_SLICE` merged
    ranges a call, at most ``capacity`` calls in flight; returns the rows found, the indexes of ``ranges`` whose
    call failed (their history is empty, as Dagger's after a failed read) and the failures' texts. A timeout
    raises :class:`LongbowTimeoutError`."""

    spans, owner = merged(ranges)
    slices = [spans[start : start + READ_SLICE] for start in range(0, len(spans), READ_SLICE)]
    rows: dict[bytes, dict[bytes, bytes]] = {}
    errors: list[str] = []

    def one(part: list[tuple[bytes, bytes]]) -> dict[bytes, dict[bytes, bytes]] | Exception:
        try:
            return store.scan(part, qualifiers)
        except LongbowTimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - counted: the rows pass on with no history
            return exc

    if len(slices) <= 1 or capacity <= 1:
        answers = [one(part) for part in slices]
    else:
        with ThreadPoolExecutor(max_workers=min(capacity, len(slices))) as pool:  # gRPC calls release the GIL
            answers = list(pool.map(one, slices))
    lost: set[int] = set()  # indexes of the slices that failed
    for number, answer in enumerate(answers):
        if isinstance(answer, Exception):
            lost.add(number)
            errors.append(describe_error(answer))
        else:
            rows.update(answer)
    failed = [i for i, o in enumerate(owner) if o is not None and o // READ_SLICE in lost]
    return rows, failed, errors
