"""Schema registry (fetching, merging, errors, digest, refresh) and the checkpoint compatibility check."""

from __future__ import annotations

import time

import pytest

from dagger.checkpoint import CheckpointStore
from dagger.errors import SchemaCompatibilityError, SchemaRegistryError
from dagger.schema.compat import check_and_record, snapshot
from dagger.schema.descriptor_sets import SchemaRegistry, StencilSettings, parse_headers
from dagger.serde.types import table_schema
from tests.conftest import DESCRIPTORS


def settings(*urls, **kw) -> StencilSettings:
    return StencilSettings(urls=list(urls), timeout_ms=2000, retries=kw.pop("retries", 0), backoff_min_ms=10, **kw)


def test_http_file_url_and_path_give_the_same_set(stencil):
    by_http = SchemaRegistry(settings(stencil.url("examples.desc"))).get()
    by_file = SchemaRegistry(settings(f"file://{DESCRIPTORS / 'examples.desc'}")).get()
    by_path = SchemaRegistry(settings(str(DESCRIPTORS / "examples.desc"))).get()
    assert by_http.sha256 == by_file.sha256 == by_path.sha256
    assert len(by_http.sha256) == 64
    message = by_http.find_message("dagger.examples.BookingLogMessage")
    assert message.fields_by_number[5].name == "event_timestamp"


def test_several_sets_merge_into_one_pool(stencil, tmp_path):
    from google.protobuf import descriptor_pb2

    full = descriptor_pb2.FileDescriptorSet.FromString((DESCRIPTORS / "examples.desc").read_bytes())
    first, second = descriptor_pb2.FileDescriptorSet(), descriptor_pb2.FileDescriptorSet()
    for f in full.file:  # both halves carry the well-known types they import
        (first if "everything" not in f.name else second).file.append(f)
        if f.name.startswith("google/"):
            second.file.append(f)
    (tmp_path / "a.desc").write_bytes(first.SerializeToString())
    (tmp_path / "b.desc").write_bytes(second.SerializeToString())
    merged = SchemaRegistry(settings(str(tmp_path / "a.desc"), str(tmp_path / "b.desc"))).get()
    assert merged.find_message("dagger.examples.BookingLogMessage")
    assert merged.find_message("dagger.test.Everything")


def test_unreachable_url_is_a_clear_error(stencil):
    with pytest.raises(
        SchemaRegistryError, match=r"cannot fetch descriptor set .*missing.desc after 1 attempt\(s\): HTTP 404"
    ):
        SchemaRegistry(settings(stencil.url("missing.desc"))).get()
    with pytest.raises(SchemaRegistryError, match=r"127.0.0.1:9/x.desc after 2 attempt\(s\): ConnectionError"):
        SchemaRegistry(settings("http://127.0.0.1:9/x.desc", retries=1)).get()


def test_non_descriptor_bytes_and_unknown_message(tmp_path):
    junk = tmp_path / "junk.desc"
    junk.write_bytes(b"<html>not a descriptor</html>")
    with pytest.raises(SchemaRegistryError, match="is not a protobuf FileDescriptorSet"):
        SchemaRegistry(settings(str(junk))).get()
    registry = SchemaRegistry(settings(str(DESCRIPTORS / "examples.desc"))).get()
    with pytest.raises(SchemaRegistryError, match="did you mean dagger.examples.Location"):
        registry.find_message("dagger.examples.Locatio")
    empty = SchemaRegistry(settings()).get()  # a job with no protobuf in it needs none
    assert (empty.sources, empty.serialized) == ([], b"")
    with pytest.raises(
        SchemaRegistryError,
        match="INPUT_SCHEMA_PROTO_CLASS names the protobuf message 'a.B', but SCHEMA_REGISTRY_STENCIL_URLS is empty",
    ):
        empty.find_message("a.B")


def test_headers_parse_and_malformed_entries_are_ignored():
    assert parse_headers("Authorization:Bearer x, X-Team:data,broken") == {
        "Authorization": "Bearer x",
        "X-Team": "data",
    }


def test_auto_refresh_picks_up_a_changed_set_after_the_ttl(tmp_path):
    path = tmp_path / "s.desc"
    data = (DESCRIPTORS / "examples.desc").read_bytes()
    path.write_bytes(data)
    registry = SchemaRegistry(settings(str(path), auto_refresh=True, ttl_ms=200))
    first = registry.get()
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet.FromString(data)
    booking = next(f for f in fds.file if f.name == "booking.proto")
    location = next(m for m in booking.message_type if m.name == "Location")
    location.field.add(name="floor", number=9, type=5, label=1)
    path.write_bytes(fds.SerializeToString())
    assert registry.get() is first  # inside the TTL: cached
    time.sleep(0.3)
    second = registry.get()
    assert second.sha256 != first.sha256
    assert "floor" in second.find_message("dagger.examples.Location").fields_by_name


def test_restart_with_a_used_field_removed_or_retyped_fails(tmp_path):
    registry = SchemaRegistry(settings(str(DESCRIPTORS / "examples.desc"))).get()
    schema = table_schema(registry.find_message("dagger.examples.BookingLogMessage"))
    check_and_record(
        CheckpointStore(str(tmp_path)), snapshot("a" * 64, {"bookings": schema}), {"service_area_id", "rowtime"}
    )
    from pyspark.sql.types import StringType, StructField, StructType

    removed = StructType([f for f in schema.fields if f.name != "service_area_id"])
    with pytest.raises(
        SchemaCompatibilityError, match="table bookings: field 'service_area_id' \\(string\\) was removed"
    ):
        check_and_record(CheckpointStore(str(tmp_path)), snapshot("b" * 64, {"bookings": removed}), {"service_area_id"})
    retyped = StructType(
        [StructField(f.name, StringType()) if f.name == "amount_paid_by_cash" else f for f in schema.fields]
    )
    with pytest.raises(SchemaCompatibilityError, match="'amount_paid_by_cash' changed type from bigint to string"):
        check_and_record(CheckpointStore(str(tmp_path)), snapshot("b" * 64, {"bookings": retyped}), None)
    # a change to a field the query does not use is fine, and so is an added field
    check_and_record(CheckpointStore(str(tmp_path)), snapshot("c" * 64, {"bookings": retyped}), {"service_area_id"})


def test_the_fetch_keys_send_the_headers_retry_after_the_backoff_and_time_out(tmp_path):
    """SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS reach the server, FETCH_RETRIES and FETCH_BACKOFF_MIN_MS retry a 503,
    FETCH_TIMEOUT_MS gives up on a server that does not answer in time."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dagger.job import load_config
    from tests.unit.config.test_config import BASE

    blob = (DESCRIPTORS / "examples.desc").read_bytes()
    seen: list[tuple[str, str | None, float]] = []

    class Flaky(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append((self.path, self.headers.get("Authorization"), time.monotonic()))
            if self.path == "/slow.desc":
                time.sleep(1.5)
            status, body = (503, b"busy") if len(seen) == 1 else (200, blob)
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except BrokenPipeError:  # the client gave up first (the timeout)
                pass

        def log_message(self, *args):  # noqa: ANN002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        config = load_config(
            data={
                **BASE,
                "SCHEMA_REGISTRY_STENCIL_URLS": f"{base}/examples.desc",
                "SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS": "Authorization:Bearer t0ken",
                "SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES": "2",
                "SCHEMA_REGISTRY_STENCIL_FETCH_BACKOFF_MIN_MS": "300",
                "SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS": "500",
            }
        )
        fetched = SchemaRegistry(StencilSettings.from_config(config)).get()
        assert fetched.find_message("dagger.examples.BookingLogMessage").name == "BookingLogMessage"
        assert [(path, auth) for path, auth, _ in seen] == [("/examples.desc", "Bearer t0ken")] * 2
        assert seen[1][2] - seen[0][2] >= 0.3  # the 503 was retried after the back-off
        seen.clear()
        slow = StencilSettings.from_config(config)
        slow.urls = [f"{base}/slow.desc"]
        slow.retries = 0
        with pytest.raises(SchemaRegistryError, match=r"slow.desc after 1 attempt\(s\): ReadTimeout"):
            SchemaRegistry(slow).get()
    finally:
        server.shutdown()
