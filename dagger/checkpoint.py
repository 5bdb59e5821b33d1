"""The job's own files under its checkpoint location, on a local disk or any filesystem URL.

Spark keeps a streaming query's offsets and state under ``SPARK_CHECKPOINT_LOCATION`` through Hadoop. The job
keeps a few files of its own beside them, and every one of them is read and written here, so that a job
started from a fresh working directory (a new container) with a remote checkpoint finds what the last run left:

==================================  =============================================================
file                                 owner
==================================  =============================================================
``dagger/schema.json``               the descriptor pin (:mod:`dagger.schema.compat`)
``bounded/runs.json``                bounded runs' input → batch id (:mod:`dagger.bounded`)
``sinks/<SINK_NAME>/batch-<n>.json``  a sink's per-batch markers (BigQuery's committed write streams)
==================================  =============================================================

Locations are plain paths (relative ones are made absolute), ``file:`` paths, or URLs that pyarrow's
filesystems read: ``s3://`` (also Hadoop's ``s3a://``; credentials from the usual AWS settings, an
S3-compatible endpoint from the session's ``fs.s3a.endpoint`` or pyarrow's ``?endpoint_override=`` query),
``gs://``, ``hdfs://`` (with libhdfs), ``abfs://``; other schemes through fsspec when it is installed. Writes are
atomic: on disks and HDFS a file is written under a temporary name and renamed into place; on object stores
(S3, GCS, Azure) one PUT already replaces an object whole. A reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

from dagger.errors import DaggerConfigError

_HADOOP_ONLY = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
#: pyarrow filesystems where an object is written whole or not at all (and a "move" is a copy and a delete)
_OBJECT_STORES = {"s3", "gcs", "abfs"}


class CheckpointStore:
    """Reads and writes JSON files under one checkpoint location.

    Parameters
    ----------
    location:
        The checkpoint location as the user wrote it (``SPARK_CHECKPOINT_LOCATION`` / ``--checkpoint-dir``).
    s3_endpoint:
        An S3-compatible endpoint (``host:port`` or ``http(s)://host:port``) for ``s3://`` / ``s3a://`` locations,
        as Spark's ``fs.s3a.endpoint``.
    """

    def __init__(self, location: str, s3_endpoint: str | None = None):
        self.location = location
        self.s3_endpoint = s3_endpoint
        self._fs: Any = None
        self._root = ""

    def __getstate__(self) -> dict[str, Any]:  # shipped to executors inside sinks: filesystems reopen there
        return {**self.__dict__, "_fs": None}

    @property
    def local(self) -> bool:
        """Whether the location is on the local disk (of the driver)."""
        scheme = _scheme(self.location)
        return scheme in ("", "file")

    def at(self, relative: str) -> str:
        """The location of ``relative`` below this one, in the same form (a sink's state directory)."""
        base, query = _split_query(self.location)
        return f"{base.rstrip('/')}/{relative.strip('/')}{query}"

    def below(self, relative: str) -> CheckpointStore:
        """The store of the location ``relative`` below this one, on the same filesystem settings."""
        return CheckpointStore(self.at(relative), self.s3_endpoint)

    def read_json(self, relative: str) -> Any:
        """The JSON value of the file ``relative`` below the location, or ``None`` when there is none."""
        filesystem, path = self._path(relative)
        try:
            with filesystem.open_input_stream(path) as stream:
                return json.loads(stream.read())
        except FileNotFoundError:
            return None

    def write_json(self, relative: str, value: Any) -> None:
        """Write ``value`` as JSON to ``relative`` below the location, atomically."""
        filesystem, path = self._path(relative)
        data = json.dumps(value, indent=1, sort_keys=True).encode()
        if filesystem.type_name in _OBJECT_STORES:  # one PUT is atomic: readers see the old object or the new one
            with filesystem.open_output_stream(path) as stream:
                stream.write(data)
            return
        parent = path.rpartition("/")[0]
        if parent:
            filesystem.create_dir(parent, recursive=True)
        temporary = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        with filesystem.open_output_stream(temporary) as stream:
            stream.write(data)
        filesystem.move(temporary, path)  # a rename: atomic on disks and HDFS

    def delete(self, relative: str) -> None:
        """Delete ``relative`` below the location (nothing happens when it does not exist)."""
        filesystem, path = self._path(relative)
        try:
            filesystem.delete_file(path)
        except FileNotFoundError:
            pass

    def _path(self, relative: str) -> tuple[Any, str]:
        if self._fs is None:
            self._fs, self._root = self._open()
        return self._fs, f"{self._root.rstrip('/')}/{relative.strip('/')}"

    def _open(self) -> tuple[Any, str]:
        from pyarrow import fs

        location = self.location
        scheme = _scheme(location)
        if scheme == "":
            return fs.LocalFileSystem(), os.path.abspath(location)
        if scheme == "file":
            return fs.LocalFileSystem(), os.path.abspath(location.removeprefix("file://").removeprefix("file:"))
        scheme = _HADOOP_ONLY.get(scheme, scheme)
        uri = f"{scheme}://{location.split('://', 1)[1]}"
        if scheme == "s3" and self.s3_endpoint and "endpoint_override=" not in uri:
            endpoint = self.s3_endpoint
            http = endpoint.startswith("http://")
            host = endpoint.removeprefix("http://").removeprefix("https://")
            base, query = _split_query(uri)
            extra = f"endpoint_override={host}" + ("&scheme=http" if http else "")
            uri = f"{base}{query + '&' if query else '?'}{extra}"
        try:
            return fs.FileSystem.from_uri(uri)
        except Exception as pyarrow_error:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError by scheme
            try:
                import fsspec
                from pyarrow.fs import FSSpecHandler, PyFileSystem
            except ImportError:
                raise DaggerConfigError(
                    f"checkpoint location {location}: {pyarrow_error}; the job reads its own checkpoint files "
                    "through pyarrow (local paths, s3://, s3a://, gs://, hdfs://, abfs://) or fsspec for other "
                    "schemes (pip install fsspec and the scheme's package)"
                ) from None
            filesystem, path = fsspec.core.url_to_fs(uri)
            return PyFileSystem(FSSpecHandler(filesystem)), path


def has_scheme(location: str) -> bool:
    """Whether ``location`` names its filesystem (``file:``, ``s3a://``…) rather than being a plain path."""
    return _scheme(location) != ""


def _scheme(location: str) -> str:
    if location.startswith("file:"):
        return "file"
    head, sep, _ = location.partition("://")
    return head.lower() if sep and head.isidentifier() else ""


def _split_query(location: str) -> tuple[str, str]:
    base, sep, query = location.partition("?")
    return base, (sep + query) if sep else ""
