"""Stencil-style schema registry: protobuf FileDescriptorSets fetched from URLs, merged into one pool.

``SCHEMA_REGISTRY_STENCIL_URLS`` lists descriptor sets (``protoc --descriptor_set_out=x.desc
--include_imports``) as http(s) URLs (fetched with ``requests`` using the configured timeout, retries,
exponential backoff and headers), ``file://`` URLs or plain paths. All files are merged into one
``DescriptorPool``; messages are found by fully qualified name. ``python:<module>`` takes the descriptors of a
generated ``*_pb2`` module instead (and of the files it imports): what ``SCHEMA_REGISTRY_STENCIL_ENABLE=false``
uses, with the modules of ``SCHEMA_REGISTRY_PYTHON_MODULES``, as Dagger used compiled classes.

The SHA-256 of the fetched bytes (all sets, in URL order) identifies the schema version: it is logged and
recorded with the checkpoint (see :mod:`dagger.schema.compat`). A job with no protobuf in it (JSON streams and
sinks) has no URL and an empty set; a message looked up in it says which key to set.

One module (~320 lines) because it is one path: the settings, fetching with its retries, parsing and merging
into one pool, and the cache a running job refreshes.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError

from dagger.errors import DescriptorFetchError, SchemaRegistryError
from dagger.schema.confluent import BLOB_PREFIX, SubjectSchemas

log = logging.getLogger(__name__)

#: a descriptor-set location that is a generated module (``python:mypackage.booking_pb2``)
PYTHON_SCHEME = "python:"


#: what a job without descriptor sets is told when it names a protobuf message all the same
NO_URLS = (
    "SCHEMA_REGISTRY_STENCIL_URLS is empty: list the descriptor sets (http(s) URLs, file:// URLs or paths) "
    "that hold the stream and sink messages"
)


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
    #: why ``urls`` is empty (a job whose streams and sinks are all JSON needs no descriptor set): said when a
    #: message is looked up all the same
    absent: str | None = None
    #: at start: the whole fetch (its retries included) ends within this many seconds
    #: (``SPARK_FIRST_CONTACT_TIMEOUT_MS``); None: the retries and back-off alone bound it (a refresh)
    deadline_s: float | None = None

    @classmethod
    def from_config(cls, config) -> StencilSettings:  # noqa: ANN001 - JobConfig, avoids a cycle
        """Build the settings from a :class:`~dagger.config.model.JobConfig`."""
        urls = list(config.SCHEMA_REGISTRY_STENCIL_URLS)
        absent = NO_URLS
        if not config.SCHEMA_REGISTRY_STENCIL_ENABLE:
            urls = [f"{PYTHON_SCHEME}{module}" for module in config.SCHEMA_REGISTRY_PYTHON_MODULES]
            absent = (
                "SCHEMA_REGISTRY_STENCIL_ENABLE is false (compiled classes) but SCHEMA_REGISTRY_PYTHON_MODULES is "
                "empty: list the generated *_pb2 modules that define the job's messages (e.g. "
                "mypackage.booking_pb2), or set SCHEMA_REGISTRY_STENCIL_ENABLE=true with descriptor set URLs"
            )
        return cls(
            urls=urls,
            timeout_ms=config.SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS,
            retries=config.SCHEMA_REGISTRY_STENCIL_FETCH_RETRIES,
            backoff_min_ms=config.SCHEMA_REGISTRY_STENCIL_FETCH_BACKOFF_MIN_MS,
            headers=parse_headers(config.SCHEMA_REGISTRY_STENCIL_FETCH_HEADERS),
            auto_refresh=config.SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH,
            ttl_ms=config.SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS,
            absent=None if urls else absent,
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


def module_descriptor_set(module_name: str) -> bytes:
    """The descriptor set of a generated protobuf module (``*_pb2``): its file and every file it imports."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DescriptorFetchError(
            f"{PYTHON_SCHEME}{module_name}: cannot import the generated module ({exc}); install it on the driver or "
            "put its directory on PYTHONPATH"
        ) from None
    file = getattr(module, "DESCRIPTOR", None)
    if not isinstance(file, FileDescriptor):
        raise SchemaRegistryError(
            f"{PYTHON_SCHEME}{module_name}: not a module generated by protoc (it has no file DESCRIPTOR)"
        )
    out = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(descriptor: FileDescriptor) -> None:
        if descriptor.name in seen:
            return
        seen.add(descriptor.name)
        for dependency in descriptor.dependencies:
            add(dependency)
        descriptor.CopyToProto(out.file.add())

    add(file)
    return out.SerializeToString()


def fetch_bytes(url: str, settings: StencilSettings) -> bytes:
    """Fetch one descriptor set from an http(s) URL, a ``file://`` URL, a path, or a ``python:`` module."""
    if url.startswith(PYTHON_SCHEME):
        return module_descriptor_set(url.removeprefix(PYTHON_SCHEME))
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https"):
        import requests

        delay = settings.backoff_min_ms / 1000.0
        last_error = ""
        ends = None if settings.deadline_s is None else time.monotonic() + settings.deadline_s
        attempt = 0
        for attempt in range(settings.retries + 1):  # noqa: B007 - said in the error
            timeout = settings.timeout_ms / 1000.0
            if ends is not None:
                timeout = max(0.2, min(timeout, ends - time.monotonic()))
            try:
                response = requests.get(url, timeout=timeout, headers=settings.headers)
                if response.status_code == 200:
                    return response.content
                last_error = f"HTTP {response.status_code} {response.reason}"
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    break  # a client error will not go away by retrying
            except requests.RequestException as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            if attempt >= settings.retries:
                break
            wait = delay if ends is None else min(delay, ends - time.monotonic())
            if wait <= 0:
                break
            log.warning("descriptor fetch %s failed (%s); retry %d in %.1fs", url, last_error, attempt + 1, wait)
            time.sleep(wait)
            delay *= 2
        if ends is not None and time.monotonic() >= ends - 0.3:
            raise DescriptorFetchError(
                f"SCHEMA_REGISTRY_STENCIL_URLS: cannot fetch descriptor set {url}: no answer in "
                f"{settings.deadline_s:.0f} s (SPARK_FIRST_CONTACT_TIMEOUT_MS; {attempt + 1} attempt(s)): "
                f"{last_error}. Check the URL, or raise SPARK_FIRST_CONTACT_TIMEOUT_MS when the server starts after "
                "the job."
            )
        raise DescriptorFetchError(
            f"SCHEMA_REGISTRY_STENCIL_URLS: cannot fetch descriptor set {url} after {attempt + 1} "
            f"attempt(s): {last_error}. Check the URL, or raise SCHEMA_REGISTRY_STENCIL_FETCH_TIMEOUT_MS / "
            "_FETCH_RETRIES."
        )
    path = Path(parsed.path if parsed.scheme == "file" else url)
    if parsed.scheme not in ("", "file") and len(parsed.scheme) > 1:
        raise SchemaRegistryError(
            f"SCHEMA_REGISTRY_STENCIL_URLS: unsupported URL scheme {parsed.scheme!r} in {url}; "
            "accepted: http://, https://, file://, a local path or python:<module>"
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

    def __init__(self, blobs: list[tuple[str, bytes]], absent: str | None = None):
        self.blobs = list(blobs)
        self.absent = absent  # why there are none (no URL configured): the error of a message looked up
        self.sources = [s for s, _ in blobs]
        #: Confluent Schema Registry subjects the streams read, by subject (:mod:`dagger.schema.confluent`)
        self.subjects: dict = {}
        digest = hashlib.sha256()
        merged = descriptor_pb2.FileDescriptorSet()
        seen: dict[str, bytes] = {}
        for source, data in blobs:
            digest.update(data)
            if source.startswith(BLOB_PREFIX):
                subject = SubjectSchemas.from_blob(data)
                self.subjects[subject.subject] = subject
                files = subject.file_descriptors() if subject.schema_type == "PROTOBUF" else []
                fds = descriptor_pb2.FileDescriptorSet(
                    file=[descriptor_pb2.FileDescriptorProto.FromString(f) for f in files]
                )
                _add_well_known(fds)
            else:
                fds = parse_descriptor_set(data, source)
            for file_proto in fds.file:
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
            if self.absent is not None:
                raise SchemaRegistryError(
                    f"{key} names the protobuf message {full_name!r}, but {self.absent}"
                ) from None
            known = self.message_names()

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


def _add_well_known(fds: descriptor_pb2.FileDescriptorSet) -> None:
    """Add the ``google/protobuf/*`` files that ``fds`` imports and lacks (Confluent's serializers do not register
    the well-known types: every client has them), from the protobuf runtime."""
    have = {f.name for f in fds.file}
    for dependency in sorted({d for f in fds.file for d in f.dependency} - have):
        if dependency.startswith("google/protobuf/"):
            module = importlib.import_module(dependency.removesuffix(".proto").replace("/", ".") + "_pb2")
            fds.file.insert(0, descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb))


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
        self.settings = settings
        self._lock = threading.Lock()
        self._current: DescriptorSet | None = None
        self._fetched_at = 0.0

    def _fetch(self) -> DescriptorSet:
        if not self.settings.urls:  # nothing in the job is protobuf (JSON streams and sinks): no set to fetch
            return DescriptorSet([], absent=self.settings.absent or NO_URLS)
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
