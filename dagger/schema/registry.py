"""Stencil-style schema registry: protobuf FileDescriptorSets fetched from URLs, merged into one pool.

``SCHEMA_REGISTRY_STENCIL_URLS`` lists descriptor sets (``protoc --descriptor_set_out=x.desc
--include_imports``) as http(s) URLs (fetched with ``requests`` using the configured timeout, retries,
exponential backoff and headers), ``file://`` URLs or plain paths. All files are merged into one
``DescriptorPool``; messages are found by fully qualified name.

The SHA-256 of the fetched bytes (all sets, in URL order) identifies the schema version: it is logged and
recorded with the checkpoint (see :mod:`dagger.schema.compat`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError

from dagger.errors import DescriptorFetchError, SchemaRegistryError

log = logging.getLogger(__name__)


@dataclass
class StencilSettings:
    """Fetch settings, mirroring Dagger's ``SCHEMA_REGISTRY_STENCIL_*`` keys."""

    urls: list[str]
    timeout_ms: int = 10000
    retries: int = 4
    backoff_min_ms: int = 60000
    headers: dict[str, str] = field(default_factory=dict)
    auto_refresh: bool = False
    ttl_ms: int = 900000

    @classmethod
    def from_config(cls, config) -> StencilSettings:  # noqa: ANN001 - JobConfig, avoids a cycle
        """Build the settings from a :class:`~dagger.config.model.JobConfig`."""
        return cls(
            urls=list(config.SCHEMA_REGISTRY_STENCIL_URLS),
            timeout_ms=config.SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS,
            retries=config.SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES,
            backoff_min_ms=config.SCHEMA_REGISTRY_STENCIL_FETCH_BACKOFF_MIN_MS,
            headers=parse_headers(config.SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS),
            auto_refresh=config.SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH,
            ttl_ms=config.SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS,
        )


def parse_headers(text: str | None) -> dict[str, str]:
    """Parse ``Key:Value,Key2:Value2``; malformed entries are logged and ignored, as Dagger does."""
    headers: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            log.warning("ignoring malformed SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS entry %r (expected Key:Value)", item)
            continue
        headers[key.strip()] = value.strip()
    return headers


def fetch_bytes(url: str, settings: StencilSettings) -> bytes:
    """Fetch one descriptor set from an http(s) URL, a ``file://`` URL or a path."""
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https"):
        import requests

        delay = settings.backoff_min_ms / 1000.0
        last_error = ""
        for attempt in range(settings.retries + 1):
            try:
                response = requests.get(url, timeout=settings.timeout_ms / 1000.0, headers=settings.headers)
                if response.status_code == 200:
                    return response.content
                last_error = f"HTTP {response.status_code} {response.reason}"
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    break  # a client error will not go away by retrying
            except requests.RequestException as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            if attempt < settings.retries:
                log.warning("descriptor fetch %s failed (%s); retry %d in %.1fs", url, last_error, attempt + 1, delay)
                time.sleep(delay)
                delay *= 2
        raise DescriptorFetchError(
            f"SCHEMA_REGISTRY_STENCIL_URLS: cannot fetch descriptor set {url} after {settings.retries + 1} "
            f"attempt(s): {last_error}. Check the URL, or raise SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS / "
            "_FETCH_RETRIES."
        )
    path = Path(parsed.path if parsed.scheme == "file" else url)
    if parsed.scheme not in ("", "file") and len(parsed.scheme) > 1:
        raise SchemaRegistryError(
            f"SCHEMA_REGISTRY_STENCIL_URLS: unsupported URL scheme {parsed.scheme!r} in {url}; "
            "accepted: http://, https://, file:// or a local path"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DescriptorFetchError(
            f"SCHEMA_REGISTRY_STENCIL_URLS: cannot read descriptor set {url}: {exc.strerror}"
        ) from None


def parse_descriptor_set(data: bytes, source: str) -> descriptor_pb2.FileDescriptorSet:
    """Parse FileDescriptorSet bytes or raise a clear error naming the source."""
    try:
        fds = descriptor_pb2.FileDescriptorSet.FromString(data)
    except DecodeError:
        fds = None
    if fds is None or not fds.file or any(not f.name for f in fds.file):
        raise SchemaRegistryError(
            f"SCHEMA_REGISTRY_STENCIL_URLS: {source} is not a protobuf FileDescriptorSet "
            f"({len(data)} bytes starting {data[:16]!r}); build one with "
            "`protoc --descriptor_set_out=FILE --include_imports your.proto`"
        )
    return fds


class DescriptorSet:
    """Merged descriptor sets: a pool, its serialized form and its digest.

    Parameters
    ----------
    blobs:
        ``(source, bytes)`` pairs, one per descriptor-set location.
    """

    def __init__(self, blobs: list[tuple[str, bytes]]):
        self.blobs = list(blobs)
        self.sources = [s for s, _ in blobs]
        digest = hashlib.sha256()
        merged = descriptor_pb2.FileDescriptorSet()
        seen: dict[str, bytes] = {}
        for source, data in blobs:
            digest.update(data)
            for file_proto in parse_descriptor_set(data, source).file:
                blob = file_proto.SerializeToString()
                if file_proto.name in seen:
                    continue  # the same file (e.g. google/protobuf/timestamp.proto) from several sets
                seen[file_proto.name] = blob
                merged.file.append(file_proto)
        self.sha256 = digest.hexdigest()
        self.serialized = merged.SerializeToString()
        self.pool = build_pool(merged)

    def find_message(self, full_name: str, key: str = "INPUT_SCHEMA_PROTO_CLASS") -> Descriptor:
        """Find a message by fully qualified name or raise an error that names the key and close names."""
        try:
            return self.pool.FindMessageTypeByName(full_name)
        except KeyError:
            known = self.message_names()
            import difflib

            close = difflib.get_close_matches(full_name, known, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known messages: {', '.join(known[:10])}"
            raise SchemaRegistryError(
                f"{key}: message {full_name!r} is not in the descriptor sets from {', '.join(self.sources)}{hint}"
            ) from None

    def message_names(self) -> list[str]:
        """Every message name in the merged sets (top-level and nested)."""
        fds = descriptor_pb2.FileDescriptorSet.FromString(self.serialized)
        names: list[str] = []

        def walk(prefix: str, messages) -> None:  # noqa: ANN001
            for m in messages:
                full = f"{prefix}.{m.name}" if prefix else m.name
                names.append(full)
                walk(full, m.nested_type)

        for f in fds.file:
            walk(f.package, f.message_type)
        return sorted(names)


def build_pool(fds: descriptor_pb2.FileDescriptorSet) -> descriptor_pool.DescriptorPool:
    """A fresh DescriptorPool holding every file of ``fds`` (dependencies first, whatever the order)."""
    pool = descriptor_pool.DescriptorPool()
    pending = list(fds.file)
    added: set[str] = set()
    while pending:
        progress = False
        for file_proto in list(pending):
            if all(dep in added for dep in file_proto.dependency):
                pool.Add(file_proto)
                added.add(file_proto.name)
                pending.remove(file_proto)
                progress = True
        if not progress:
            missing = sorted({d for f in pending for d in f.dependency if d not in added})
            raise SchemaRegistryError(
                f"descriptor sets are incomplete: {', '.join(sorted(f.name for f in pending))} import "
                f"{', '.join(missing)}, which no set contains; rebuild with `protoc --include_imports`"
            )
    return pool


class SchemaRegistry:
    """Descriptor cache with optional TTL refresh (``SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH``).

    The first :meth:`get` fetches every URL; later calls return the cached set, re-fetched after the TTL
    when auto-refresh is on (a failed refresh keeps the previous set and logs a warning).
    """

    def __init__(self, settings: StencilSettings):
        if not settings.urls:
            raise SchemaRegistryError(
                "SCHEMA_REGISTRY_STENCIL_URLS is empty: list the descriptor sets (http(s) URLs, file:// URLs or "
                "paths) that hold the stream and sink messages"
            )
        self.settings = settings
        self._lock = threading.Lock()
        self._current: DescriptorSet | None = None
        self._fetched_at = 0.0

    def _fetch(self) -> DescriptorSet:
        blobs = [(url, fetch_bytes(url, self.settings)) for url in self.settings.urls]
        result = DescriptorSet(blobs)
        log.info("descriptor sets %s loaded, sha256=%s", ", ".join(self.settings.urls), result.sha256)
        return result

    def get(self) -> DescriptorSet:
        """The current descriptor set, fetched on first use and refreshed after the TTL if enabled."""
        with self._lock:
            now = time.monotonic()
            if self._current is None:
                self._current = self._fetch()
                self._fetched_at = now
            elif self.settings.auto_refresh and (now - self._fetched_at) * 1000 >= self.settings.ttl_ms:
                try:
                    fresh = self._fetch()
                    if fresh.sha256 != self._current.sha256:
                        log.info("descriptor sets changed: sha256 %s -> %s", self._current.sha256, fresh.sha256)
                    self._current = fresh
                except SchemaRegistryError as exc:
                    log.warning("descriptor refresh failed, keeping the cached set: %s", exc)
                self._fetched_at = now
            return self._current
