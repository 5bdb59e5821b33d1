"""``SINK_TYPE=influx``: the sink (on the driver: its checks of the output schema) and its writer (on the
executors: points sent in requests of ``SINK_INFLUX_BATCH_SIZE``, retried with back-off, rejected rows
isolated).

One module (~340 lines): the sink, its writer and the retries only the writer uses.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dagger.errors import SinkError
from dagger.influx.line_protocol import TIME_COLUMN, join_lines, line_protocol
from dagger.influx.settings import InfluxSinkSettings
from dagger.optional import require
from dagger.plugins.sink import Sink, SinkEnv, SinkWriter
from dagger.sinks.capture import keep, read_spool_rows
from dagger.sinks.readback import point
from dagger.sinks.rejected import RejectedRows

if TYPE_CHECKING:
    pass


_RETENTION_DROP = re.compile(r"points beyond retention policy dropped=(\d+)")
_DEFAULT_BATCH = 5000


def _retry(sink: InfluxSink) -> Any:
    """urllib3's retry policy for the sink's writes: connection errors, timeouts, 429 and 5xx, any verb (a write
    rewrites the same points), exponential back-off; the last answer is returned rather than raised."""
    from urllib3.util.retry import Retry

    return Retry(
        total=sink.retries,
        backoff_factor=sink.retry_backoff_ms / 2000,  # urllib3 waits factor * 2^(n-1), nothing before the first
        backoff_max=10,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=None,
        raise_on_status=False,
        respect_retry_after_header=True,
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """A client error and what it wraps, outermost first (urllib3's pool errors keep theirs in ``reason`` or
    ``args``)."""
    out = [exc]
    while len(out) < 8:
        seen = out[-1]
        inner = (
            getattr(seen, "reason", None)
            or (seen.args[1] if len(seen.args) > 1 and isinstance(seen.args[1], BaseException) else None)
            or (seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None)
        )
        if not isinstance(inner, BaseException) or inner in out:
            break
        out.append(inner)
    return out


def _connected(exc: BaseException) -> bool:
    """Whether a failed request got as far as a connection (reset or closed by the peer) rather than none."""

    dropped = (ConnectionResetError, ConnectionAbortedError, http.client.RemoteDisconnected)
    return any(isinstance(seen, dropped) for seen in _chain(exc))


def _cause(exc: BaseException) -> str:
    """The innermost reason of a client error (``Connection refused`` rather than urllib3's pool wrapper)."""
    text = str(_chain(exc)[-1])
    return text.split(": ", 1)[1] if text.startswith("<") and ": " in text else text


class _InfluxWriter(SinkWriter):
    def __init__(self, sink: InfluxSink, partition_id: int, batch_id: int):
        self.sink = sink
        self.rejected = RejectedRows(sink, batch_id, partition_id)
        self.pending: list[pa.Array] = []
        self.pending_points = 0
        self.first_pending = 0.0
        self.written = 0
        self.dropped = 0
        self._client: Any = None
        self.where = (batch_id, partition_id)
        #: dagger test: the lines kept instead of posted (dagger.sinks.capture)
        self.captured: list[str] = []

    def abort(self) -> None:
        self.rejected.abort()
        self.pending, self.pending_points = [], 0
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()
        self._client = None

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        lines, has_field = line_protocol(batch, self.sink.measurement)
        if not pc.all(has_field).as_py():
            bad = pc.invert(has_field)
            rows = batch.filter(bad)
            self.rejected.add(
                rows,
                [f"row has no field: every column but tags and {TIME_COLUMN} is null"] * rows.num_rows,
                ["INVALID_MESSAGE_ERROR"] * rows.num_rows,
            )
            lines = lines.filter(has_field)
        if len(lines):
            if not self.pending:
                self.first_pending = time.monotonic()
            self.pending.append(lines)
            self.pending_points += len(lines)
        size = self.sink.batch_size
        duration = self.sink.flush_duration_ms / 1000
        if self.pending_points >= size or (duration and time.monotonic() - self.first_pending >= duration):
            self._send()

    def _send(self) -> None:
        if not self.pending:
            return
        lines = pa.concat_arrays(self.pending)
        self.pending, self.pending_points = [], 0
        size = self.sink.batch_size
        for start in range(0, len(lines), size):
            chunk = lines.slice(start, size)
            self._post(join_lines(chunk), len(chunk))

    def _post(self, payload: str, points: int) -> None:
        sink = self.sink
        if sink.capture is not None:  # dagger test: kept, not sent
            self.captured += payload.split("\n")
            self.written += points
            return
        try:
            if sink.api_version == "2":
                message = self._post_v2(payload)
            else:
                message = self._post_v1(payload)
        except SinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - connection errors, timeouts, after the retries
            raise SinkError(
                f"sink '{sink.display_name}': InfluxDB at {sink.url} did not take the points after"
                f" {sink.retries} retries (SINK_INFLUX_RETRIES): {_cause(exc)}"
            ) from None
        if message is None:
            self.written += points
            return
        dropped = _RETENTION_DROP.search(message)
        if dropped and "partial write" in message and message.count("dropped=") == 1:
            self.dropped += int(dropped.group(1))
            self.written += points - int(dropped.group(1))
            return
        raise SinkError(f"sink '{sink.display_name}': InfluxDB at {sink.url} refused the write: {message}")

    def _post_v1(self, payload: str) -> str | None:
        import requests

        sink = self.sink
        if self._client is None:
            from requests.adapters import HTTPAdapter

            self._client = requests.Session()
            self._client.mount("http://", HTTPAdapter(max_retries=_retry(sink)))
            self._client.mount("https://", HTTPAdapter(max_retries=_retry(sink)))
            if sink.username:
                self._client.auth = (sink.username, sink.password or "")
        params = {"db": sink.database, "precision": "ms"}
        if sink.retention_policy:
            params["rp"] = sink.retention_policy
        response = self._client.post(
            sink.url.rstrip("/") + "/write", params=params, data=payload.encode(), timeout=sink.timeout_ms / 1000
        )
        if response.status_code in (200, 204):
            return None
        try:
            return json.loads(response.text).get("error") or response.text
        except ValueError:
            return f"HTTP {response.status_code}: {response.text.strip()[:500]}"

    def _post_v2(self, payload: str) -> str | None:
        from influxdb_client import InfluxDBClient, WritePrecision
        from influxdb_client.client.write_api import SYNCHRONOUS
        from influxdb_client.rest import ApiException

        sink = self.sink
        if self._client is None:
            client = InfluxDBClient(
                url=sink.url, token=sink.token or "", org=sink.org or "-", timeout=sink.timeout_ms, retries=_retry(sink)
            )
            self._client = client.write_api(write_options=SYNCHRONOUS)
        try:
            self._client.write(
                bucket=sink.bucket, org=sink.org or "-", record=payload, write_precision=WritePrecision.MS
            )
        except ApiException as exc:
            try:
                return json.loads(exc.body or "{}").get("message") or f"HTTP {exc.status}: {exc.body}"
            except ValueError:
                return f"HTTP {exc.status}: {exc.body or exc.reason}"
        return None

    def flush(self) -> dict[str, int]:
        self._send()
        if self.captured:
            keep(self.sink.capture, *self.where, [pa.record_batch({"line": pa.array(self.captured, pa.string())})])
            self.captured = []
        self.sink.count("written", self.written)
        self.sink.count("dropped", self.dropped)
        return {"written": self.written, "dropped": self.dropped, "dead_letters": self.rejected.flush()}


class InfluxSink(Sink):
    """Points to one InfluxDB measurement."""

    name = "influx"
    rerun = "overwrites: points of the same series and time replace the ones written before (idempotent)"

    def __init__(
        self,
        url: str,
        measurement: str,
        database: str | None = None,
        retention_policy: str | None = None,
        username: str | None = None,
        password: str | None = None,
        api_version: str = "1",
        token: str | None = None,
        org: str | None = None,
        bucket: str | None = None,
        batch_size: int = 0,
        flush_duration_ms: int = 0,
        timeout_ms: int = 30000,
        retries: int = 6,
        retry_backoff_ms: int = 500,
    ):
        self.url = url
        self.measurement = measurement
        self.database = database
        self.retention_policy = retention_policy
        self.username = username
        self.password = password
        self.api_version = api_version
        self.token = token
        self.org = org
        self.bucket = bucket or (f"{database}/{retention_policy}" if retention_policy else database)
        self.batch_size = batch_size or _DEFAULT_BATCH
        self.flush_duration_ms = flush_duration_ms
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms

    @classmethod
    def from_settings(cls, config: InfluxSinkSettings, env: SinkEnv) -> InfluxSink:
        if config.SINK_INFLUX_API_VERSION == "2":
            require("influxdb_client", "influx", "SINK_INFLUX_API_VERSION 2")
        return cls(
            url=config.SINK_INFLUX_URL,
            measurement=config.SINK_INFLUX_MEASUREMENT_NAME,
            database=config.SINK_INFLUX_DB_NAME,
            retention_policy=config.SINK_INFLUX_RETENTION_POLICY,
            username=config.SINK_INFLUX_USERNAME,
            password=config.SINK_INFLUX_PASSWORD,
            api_version=config.SINK_INFLUX_API_VERSION,
            token=config.SINK_INFLUX_TOKEN,
            org=config.SINK_INFLUX_ORG,
            bucket=config.SINK_INFLUX_BUCKET,
            batch_size=config.SINK_INFLUX_BATCH_SIZE,
            flush_duration_ms=config.SINK_INFLUX_FLUSH_DURATION_MS,
            timeout_ms=config.SINK_INFLUX_TIMEOUT_MS,
            retries=config.SINK_INFLUX_RETRIES,
            retry_backoff_ms=config.SINK_INFLUX_RETRY_BACKOFF_MS,
        )

    def written_records(self, capture: str) -> list[dict[str, Any]]:
        return [point(row["line"]) for row in read_spool_rows(capture)]

    def describe(self) -> str:
        where = f"bucket {self.bucket}" if self.api_version == "2" else f"db {self.database}"
        return f"influx measurement {self.measurement} in {where} at {self.url} (API v{self.api_version})"

    def check(self, schema: pa.Schema) -> list[str]:
        problems = []
        if TIME_COLUMN in schema.names and not pa.types.is_timestamp(schema.field(TIME_COLUMN).type):
            problems.append(
                f"SINK_TYPE influx: column {TIME_COLUMN} is {schema.field(TIME_COLUMN).type}, but it is the point "
                "time and must be a TIMESTAMP (e.g. TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp)"
            )
        fields = [n for n in schema.names if n and n != TIME_COLUMN and not n.startswith(("tag_", "label_"))]
        if not fields:
            problems.append(
                f"SINK_TYPE influx: the output ({', '.join(schema.names)}) has no field column; InfluxDB needs at "
                f"least one column besides tag_*, label_* and {TIME_COLUMN}"
            )
        return problems

    def reach(self) -> None:
        """At start, on the driver: the server must answer ``/ping`` within :attr:`first_contact_s` (any HTTP answer
        will do: a wrong database or login is said by the first write, with the server's message)."""
        import requests

        deadline = time.monotonic() + self.first_contact_s
        while True:
            try:
                requests.get(self.url.rstrip("/") + "/ping", timeout=max(0.2, min(2.0, deadline - time.monotonic())))
                return
            except requests.RequestException as exc:
                if _connected(exc):  # something took the connection, then dropped it: the writes' retries handle that
                    return
                if time.monotonic() + 0.5 >= deadline:
                    raise SinkError(
                        f"sink '{self.display_name}': InfluxDB at SINK_INFLUX_URL {self.url} did not answer in "
                        f"{self.first_contact_s:.0f} s (SPARK_FIRST_CONTACT_TIMEOUT_MS): {_cause(exc)} (check "
                        "SINK_INFLUX_URL; raise SPARK_FIRST_CONTACT_TIMEOUT_MS when the server starts after the job)"
                    ) from None
                time.sleep(0.5)

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _InfluxWriter(self, partition_id, batch_id)

    def commit(self, results: list[Any], batch_id: int) -> None:
        written = sum((r or {}).get("written", 0) for r in results)
        dropped = sum((r or {}).get("dropped", 0) for r in results)
        logging.getLogger(__name__).info(
            "batch %d: %d point(s) written to %s%s",
            batch_id,
            written,
            self.measurement,
            f", {dropped} beyond the retention policy dropped" if dropped else "",
        )
