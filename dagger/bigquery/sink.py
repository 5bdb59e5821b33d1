"""``SINK_TYPE=bigquery``: the sink (on the driver: the dataset and table set up, the micro-batch's streams
committed once and recorded under the checkpoint), its clients, and the Storage Write API writer (on the
executors: one PENDING stream per task, rows appended at offsets, rejected rows isolated).

One module (~510 lines) because the sink and its writer share the clients, their retry policy and the error
mapping; the keys and the schema are their own modules.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dagger.bigquery.schema import bigquery_schema, missing_fields, row_converter
from dagger.bigquery.settings import BigQuerySinkSettings, parse_labels
from dagger.errors import DaggerConfigError, SinkError
from dagger.optional import require
from dagger.plugins.sink import Sink, SinkEnv, SinkWriter
from dagger.serde.types import TIMESTAMP
from dagger.sinks.capture import keep, read_spool_rows
from dagger.sinks.readback import plain
from dagger.sinks.rejected import RejectedRows, RowsRefused, isolate
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    from dagger.checkpoint import CheckpointStore


log = logging.getLogger(__name__)

_MAX_REQUEST_BYTES = 9 * 1024 * 1024


# -- clients ------------------------------------------------------------------------------------------------


def _credentials(sink: BigQuerySink) -> Any:
    if sink.anonymous:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    if sink.credential_path:
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_file(
            sink.credential_path, scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
    return None  # Application Default Credentials


def rest_client(sink: BigQuerySink) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.cloud import bigquery

    options = ClientOptions(api_endpoint=sink.api_endpoint) if sink.api_endpoint else None
    return bigquery.Client(project=sink.project, credentials=_credentials(sink), client_options=options)


def _close_client(client: Any) -> None:
    client.transport.close()


_WRITE_CLIENTS = BuiltCache(8, on_evict=_close_client)


def write_client(sink: BigQuerySink) -> Any:
    """A Storage Write API client (cached per endpoint and credentials in each worker process)."""
    return _WRITE_CLIENTS.get(
        content_key(sink.storage_endpoint, sink.credential_path, sink.anonymous), lambda: _new_write_client(sink)
    )


def _new_write_client(sink: BigQuerySink) -> Any:
    from google.cloud import bigquery_storage_v1

    endpoint = sink.storage_endpoint
    if endpoint and (endpoint.startswith("http://") or endpoint.split(":")[0] in ("127.0.0.1", "localhost")):
        import grpc
        from google.cloud.bigquery_storage_v1.services.big_query_write.transports import (
            BigQueryWriteGrpcTransport,
        )

        target = endpoint.removeprefix("http://")
        channel = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)])
        client = bigquery_storage_v1.BigQueryWriteClient(transport=BigQueryWriteGrpcTransport(channel=channel))
    else:
        from google.api_core.client_options import ClientOptions

        options = ClientOptions(api_endpoint=endpoint) if endpoint else None
        client = bigquery_storage_v1.BigQueryWriteClient(credentials=_credentials(sink), client_options=options)
    return client


def _retry(sink: BigQuerySink, timeout_s: float | None = None) -> Any:
    from google.api_core import exceptions, retry

    transient = retry.if_exception_type(
        exceptions.InternalServerError,
        exceptions.BadGateway,
        exceptions.ServiceUnavailable,
        exceptions.GatewayTimeout,
        exceptions.TooManyRequests,
        exceptions.DeadlineExceeded,
        ConnectionError,
    )
    deadline = sink.retry_deadline_ms / 1000 if timeout_s is None else timeout_s
    return retry.Retry(predicate=transient, initial=0.2, maximum=10.0, timeout=deadline)


@contextlib.contextmanager
def _storage_errors(sink: BigQuerySink, what: str) -> Iterator[None]:
    """A Storage Write API call's failure as one line naming the endpoint, the table and the setting to change,
    instead of google-api-core's ``RetryError: Timeout of 2.0s exceeded``."""
    from google.api_core import exceptions

    try:
        yield
    except exceptions.RetryError as exc:
        endpoint = sink.storage_endpoint or "bigquerystorage.googleapis.com"
        raise SinkError(
            f"sink '{sink.display_name}': the BigQuery Storage Write API at {endpoint} did not {what} for"
            f" {sink.table_path} within SINK_BIGQUERY_RETRY_DEADLINE_MS ({sink.retry_deadline_ms} ms): {exc.cause}"
        ) from None
    except exceptions.GoogleAPICallError as exc:
        raise SinkError(f"sink '{sink.display_name}': {sink.table_path}: cannot {what}: {exc.message}") from None


# -- writer -------------------------------------------------------------------------------------------------

_TRANSIENT_CODES = {4, 8, 10, 13, 14}  # DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE
_ALREADY_EXISTS = 6


class _BigQueryWriter(SinkWriter):
    def __init__(self, sink: BigQuerySink, partition_id: int, batch_id: int):
        self.sink = sink
        self.rejected = RejectedRows(sink, batch_id, partition_id)
        self.converter = row_converter(sink.descriptor_set_b64, sink.message)
        self.stream: str | None = None
        self.offset = 0
        self.where = (batch_id, partition_id)
        #: dagger test: the rows kept instead of appended (dagger.sinks.capture)
        self.captured: list[pa.RecordBatch] = []

    def abort(self) -> None:
        # rows appended to a pending stream that is never committed are discarded by BigQuery
        self.rejected.abort()
        self.stream = None

    # each incoming batch is sent in request-sized chunks; a refused chunk is split until the refused rows
    # are isolated. A request either lands whole or writes nothing, so no row is sent twice.
    def write(self, batch: pa.RecordBatch) -> None:
        size = self.sink.batch_size
        for start in range(0, batch.num_rows, size):
            isolate(batch.slice(start, size), self._append, self.rejected)

    def _append(self, batch: pa.RecordBatch) -> None:
        try:
            rows = self.converter.convert(batch)
        except SinkError as exc:
            raise RowsRefused("INVALID_MESSAGE_ERROR", str(exc)) from None
        if rows.nbytes > _MAX_REQUEST_BYTES and rows.num_rows > 1:
            half = batch.num_rows // 2
            isolate(batch.slice(0, half), self._append, self.rejected)
            isolate(batch.slice(half), self._append, self.rejected)
            return
        self._send(rows)

    def _send(self, rows: pa.RecordBatch) -> None:
        if self.sink.capture is not None:  # dagger test: kept, not appended
            self.captured.append(rows)
            self.offset += rows.num_rows
            return
        from google.api_core import exceptions
        from google.cloud.bigquery_storage_v1 import types

        client = write_client(self.sink)
        default = not self.sink.insert_ids  # the table's default stream: rows visible at once, no offsets
        if self.stream is None and default:
            self.stream = f"{self.sink.table_path}/streams/_default"
        if self.stream is None:
            with _storage_errors(self.sink, "open a write stream"):
                stream = client.create_write_stream(
                    parent=self.sink.table_path,
                    write_stream=types.WriteStream(type_=types.WriteStream.Type.PENDING),
                    retry=_retry(self.sink),
                    timeout=self.sink.read_timeout_ms / 1000,
                )
            self.stream = stream.name
        request = types.AppendRowsRequest(
            write_stream=self.stream,
            offset=None if default else self.offset,
            arrow_rows=types.AppendRowsRequest.ArrowData(
                writer_schema=types.ArrowSchema(serialized_schema=rows.schema.serialize().to_pybytes()),
                rows=types.ArrowRecordBatch(serialized_record_batch=rows.serialize().to_pybytes()),
            ),
        )
        deadline = time.monotonic() + self.sink.retry_deadline_ms / 1000
        delay = 0.2
        while True:
            try:
                responses = list(client.append_rows(iter([request]), timeout=self.sink.read_timeout_ms / 1000))
            except (exceptions.NotFound, exceptions.PermissionDenied, exceptions.Unauthenticated) as exc:
                raise SinkError(f"sink '{self.sink.display_name}': {self.sink.table_path}: {exc.message}") from None
            except exceptions.GoogleAPICallError as exc:
                if time.monotonic() + delay > deadline:
                    raise RowsRefused("SINK_5XX_ERROR", f"BigQuery did not accept the rows in time: {exc}") from None
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            response = responses[-1] if responses else None
            error = response.error if response is not None and "error" in response else None
            if error is None or error.code == 0:
                self.offset += rows.num_rows
                return
            if error.code == _ALREADY_EXISTS:  # this append landed before (a retry after a lost response)
                self.offset += rows.num_rows
                return
            row_errors = list(response.row_errors) if "row_errors" in response else []
            if row_errors:
                reasons = {e.index: e.message for e in row_errors}
                first = next(iter(reasons.values()))
                raise RowsRefused("SINK_4XX_ERROR", f"BigQuery refused the row: {first}", rows=list(reasons))
            too_large = "exceed" in error.message.lower() or "too large" in error.message.lower()
            if error.code in _TRANSIENT_CODES and not too_large:
                if time.monotonic() + delay > deadline:
                    raise RowsRefused("SINK_5XX_ERROR", f"BigQuery error {error.code}: {error.message}") from None
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            raise RowsRefused("SINK_4XX_ERROR", f"BigQuery refused the rows: {error.message}")

    def flush(self) -> dict[str, Any]:
        rows = self.offset
        if self.sink.capture is not None:
            keep(self.sink.capture, *self.where, self.captured)
            self.sink.count("written", rows)
            return {"stream": None, "rows": rows, "dead_letters": self.rejected.flush()}
        if self.stream is not None and not self.sink.insert_ids:  # the default stream: nothing to finalize or commit
            self.sink.count("written", rows)
            return {"stream": None, "rows": rows, "dead_letters": self.rejected.flush()}
        if self.stream is not None:
            with _storage_errors(self.sink, "finalize a write stream"):
                write_client(self.sink).finalize_write_stream(
                    name=self.stream, retry=_retry(self.sink), timeout=self.sink.read_timeout_ms / 1000
                )
        self.sink.count("written", rows)
        return {"stream": self.stream, "rows": rows, "dead_letters": self.rejected.flush()}


# -- sink ----------------------------------------------------------------------------------------------------


class BigQuerySink(Sink):
    """Rows to one BigQuery table, exactly once per micro-batch."""

    name = "bigquery"
    rerun = "idempotent for the same input and checkpoint: the recorded write streams are committed once; other input appends rows"

    def __init__(
        self,
        project: str,
        dataset: str,
        table: str,
        message: str,
        descriptor_set_b64: str,
        *,
        batch_size: int = 500,
        dataset_labels: dict[str, str] | None = None,
        table_labels: dict[str, str] | None = None,
        partition_key: str | None = None,
        partition_expiry_ms: int | None = None,
        location: str | None = None,
        credential_path: str | None = None,
        anonymous: bool = False,
        api_endpoint: str | None = None,
        storage_endpoint: str | None = None,
        read_timeout_ms: int = 60000,
        retry_deadline_ms: int = 120000,
        insert_ids: bool = True,
    ):
        self.project = project
        self.dataset = dataset
        self.table = table
        self.message = message
        self.descriptor_set_b64 = descriptor_set_b64
        self.batch_size = batch_size
        self.dataset_labels = dataset_labels or {}
        self.table_labels = table_labels or {}
        self.partition_key = partition_key
        self.partition_expiry_ms = partition_expiry_ms
        self.location = location
        self.credential_path = credential_path
        self.anonymous = anonymous
        self.api_endpoint = api_endpoint
        self.storage_endpoint = storage_endpoint
        self.read_timeout_ms = read_timeout_ms
        self.retry_deadline_ms = retry_deadline_ms
        self.insert_ids = insert_ids  # False: the default stream, at-least-once (SINK_BIGQUERY_ROW_INSERT_ID_ENABLE)
        self.state = None
        if not insert_ids:
            self.rerun = "duplicates: its rows are appended to the default stream again (SINK_BIGQUERY_ROW_INSERT_ID_ENABLE=false)"

    @classmethod
    def from_settings(cls, config: BigQuerySinkSettings, env: SinkEnv) -> BigQuerySink:
        descriptors = env.descriptors
        require("google.cloud.bigquery", "bigquery", "SINK_TYPE bigquery")
        require("google.cloud.bigquery_storage_v1", "bigquery", "SINK_TYPE bigquery")
        key = "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS"
        descriptor = descriptors.find_message(config.SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS, key)
        partition_key = (
            config.SINK_BIGQUERY_TABLE_PARTITION_KEY if config.SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE else None
        )
        if partition_key:
            field = descriptor.fields_by_name.get(partition_key)
            if field is None or field.message_type is None or field.message_type.full_name != TIMESTAMP:
                timestamps = [
                    f.name for f in descriptor.fields if f.message_type and f.message_type.full_name == TIMESTAMP
                ]
                raise DaggerConfigError(
                    f"SINK_BIGQUERY_TABLE_PARTITION_KEY: {partition_key!r} is not a google.protobuf.Timestamp field of "
                    f"{descriptor.full_name}; accepted: {', '.join(timestamps) or 'none (the message has no Timestamp)'}"
                )
        return cls(
            project=config.SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID,
            dataset=config.SINK_BIGQUERY_DATASET_NAME,
            table=config.SINK_BIGQUERY_TABLE_NAME,
            message=config.SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS,
            descriptor_set_b64=base64.b64encode(descriptors.serialized).decode(),
            batch_size=config.SINK_BIGQUERY_BATCH_SIZE,
            dataset_labels=parse_labels(config.SINK_BIGQUERY_DATASET_LABELS, "SINK_BIGQUERY_DATASET_LABELS"),
            table_labels=parse_labels(config.SINK_BIGQUERY_TABLE_LABELS, "SINK_BIGQUERY_TABLE_LABELS"),
            partition_key=partition_key,
            partition_expiry_ms=config.SINK_BIGQUERY_TABLE_PARTITION_EXPIRY_MS,
            location=config.SINK_BIGQUERY_DATASET_LOCATION,
            credential_path=config.SINK_BIGQUERY_CREDENTIAL_PATH,
            anonymous=config.SINK_BIGQUERY_ANONYMOUS_CREDENTIALS,
            api_endpoint=config.SINK_BIGQUERY_API_ENDPOINT,
            storage_endpoint=config.SINK_BIGQUERY_STORAGE_API_ENDPOINT,
            read_timeout_ms=config.SINK_BIGQUERY_CLIENT_READ_TIMEOUT_MS,
            retry_deadline_ms=config.SINK_BIGQUERY_RETRY_DEADLINE_MS,
            insert_ids=config.SINK_BIGQUERY_ROW_INSERT_ID_ENABLE is not False,
        )

    @property
    def table_id(self) -> str:
        return f"{self.project}.{self.dataset}.{self.table}"

    @property
    def table_path(self) -> str:
        return f"projects/{self.project}/datasets/{self.dataset}/tables/{self.table}"

    def written_records(self, capture: str) -> list[dict[str, Any]]:
        return [plain({k: v for k, v in row.items() if v is not None}) for row in read_spool_rows(capture)]

    def expected_record(self, record: dict[str, Any], partial: bool) -> dict[str, Any]:
        return {k: v for k, v in record.items() if v is not None}  # its rows leave null columns out

    def describe(self) -> str:
        once = "" if self.insert_ids else ", at-least-once through the default stream"
        return f"bigquery table {self.table_id} as {self.message}{once}"

    def check(self, schema: pa.Schema) -> list[str]:
        converter = row_converter(self.descriptor_set_b64, self.message)
        problems = converter.encoder.check(schema)
        if not problems and not converter.encoder.mapped_columns(schema.names):
            problems.append(
                f"SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS: no output column ({', '.join(schema.names)}) matches a "
                f"field of {self.message}; every row would be empty"
            )
        return problems

    def prepare(self) -> None:
        """Create the dataset and table if missing; add fields the proto gained to the table schema (a captured
        sink, in ``dagger test``, contacts nothing)."""
        if self.capture is not None:
            return
        from google.api_core import exceptions
        from google.cloud import bigquery

        client = rest_client(self)
        # at start, BigQuery that does not answer ends the job within SPARK_FIRST_CONTACT_TIMEOUT_MS
        first = self.first_contact_s < self.retry_deadline_ms / 1000
        deadline = (
            (self.first_contact_s, "SPARK_FIRST_CONTACT_TIMEOUT_MS")
            if first
            else (self.retry_deadline_ms / 1000, "SINK_BIGQUERY_RETRY_DEADLINE_MS")
        )
        retry = _retry(self, deadline[0])
        timeout = min(self.read_timeout_ms / 1000, deadline[0])
        wanted = bigquery_schema(row_converter(self.descriptor_set_b64, self.message).encoder.descriptor)
        try:
            dataset = bigquery.Dataset(f"{self.project}.{self.dataset}")
            if self.location:
                dataset.location = self.location
            if self.dataset_labels:
                dataset.labels = self.dataset_labels
            client.create_dataset(dataset, exists_ok=True, retry=retry, timeout=timeout)
            try:
                table = client.get_table(self.table_id, retry=retry, timeout=timeout)
            except exceptions.NotFound:
                table = bigquery.Table(self.table_id, schema=wanted)
                if self.table_labels:
                    table.labels = self.table_labels
                if self.partition_key:
                    table.time_partitioning = bigquery.TimePartitioning(
                        type_=bigquery.TimePartitioningType.DAY,
                        field=self.partition_key,
                        expiration_ms=self.partition_expiry_ms,
                    )
                client.create_table(table, retry=retry, timeout=timeout)
                log.info("created BigQuery table %s (%d columns)", self.table_id, len(wanted))
                return
            merged, added = missing_fields(list(table.schema), wanted)
            changed = []
            if added:
                table.schema = merged
                changed.append("schema")
            if self.table_labels and any(table.labels.get(k) != v for k, v in self.table_labels.items()):
                table.labels = {**table.labels, **self.table_labels}
                changed.append("labels")
            if changed:
                client.update_table(table, changed, retry=retry, timeout=timeout)
                if added:
                    log.info("added field(s) %s to BigQuery table %s", ", ".join(added), self.table_id)
        except exceptions.GoogleAPICallError as exc:
            raise SinkError(
                f"sink '{self.display_name}': cannot prepare table {self.table_id}: {exc.message}"
            ) from None
        except exceptions.RetryError as exc:
            raise SinkError(
                f"sink '{self.display_name}': BigQuery at {self.api_endpoint or 'bigquery.googleapis.com'} did not "
                f"answer within {deadline[1]} ({deadline[0] * 1000:.0f} ms): {exc.cause}"
            ) from None

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _BigQueryWriter(self, partition_id, batch_id)

    # -- exactly-once commit ----------------------------------------------------------------------------

    def commit(self, results: list[Any], batch_id: int) -> None:
        streams = [r["stream"] for r in results if r and r.get("stream")]
        rows = sum(r.get("rows", 0) for r in results if r)
        recorded = self._read_marker(batch_id)
        if recorded is not None:
            outcome = self._commit_streams(recorded, replay=True)
            if outcome != "missing":
                log.info(
                    "batch %d was already written to %s (streams %s); the re-run's %d row(s) are discarded",
                    batch_id,
                    self.table_id,
                    outcome,
                    rows,
                )
                return
            log.warning(
                "batch %d: the streams recorded by an earlier run are gone; writing the re-run's rows", batch_id
            )
        if not streams:
            return
        self._write_marker(batch_id, streams)
        self._commit_streams(streams, replay=False)
        log.info("batch %d: %d row(s) committed to %s", batch_id, rows, self.table_id)

    def _commit_streams(self, streams: list[str], replay: bool) -> str:
        from google.cloud.bigquery_storage_v1 import types

        if not streams:
            return "committed"
        with _storage_errors(self, "commit the micro-batch's write streams"):
            response = write_client(self).batch_commit_write_streams(
                request=types.BatchCommitWriteStreamsRequest(parent=self.table_path, write_streams=streams),
                retry=_retry(self),
                timeout=self.read_timeout_ms / 1000,
            )
        errors = list(response.stream_errors)
        if not errors:
            return "committed now"
        codes = types.StorageError.StorageErrorCode
        already = [
            e
            for e in errors
            if e.code == codes.STREAM_ALREADY_COMMITTED
            or (e.code == codes.INVALID_STREAM_STATE and "committed" in e.error_message.lower())
        ]
        if replay and len(already) == len(errors):
            return "committed before"
        if replay and all(e.code == codes.STREAM_NOT_FOUND for e in errors):
            return "missing"
        raise SinkError(
            f"sink '{self.display_name}': BigQuery refused to commit the batch to {self.table_id}: "
            + "; ".join(f"{e.entity}: {e.error_message}" for e in errors[:3])
        )

    def _markers(self) -> CheckpointStore | None:
        return self.state

    def _read_marker(self, batch_id: int) -> list[str] | None:
        markers = self._markers()
        recorded = markers.read_json(f"batch-{batch_id}.json") if markers else None
        return recorded["streams"] if recorded else None

    def _write_marker(self, batch_id: int, streams: list[str]) -> None:
        markers = self._markers()
        if markers is None:
            return
        markers.write_json(f"batch-{batch_id}.json", {"batch_id": batch_id, "streams": streams})
        if batch_id >= 100:  # keep the last hundred; clean-up is best effort (the marker is written)
            try:
                markers.delete(f"batch-{batch_id - 100}.json")
            except OSError as exc:
                log.warning("sink '%s': could not delete an old batch marker: %s", self.display_name, exc)
