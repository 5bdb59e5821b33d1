"""Columnar reads of one Kafka partition range: each fetch is a :class:`Chunk` of Arrow arrays, not messages.

confluent-kafka hands Python one ``Message`` object per record (~1.3 µs each on this hardware, half of a
reader's time). :class:`NativeFetcher` instead calls librdkafka's ``rd_kafka_consume_batch_queue`` from a
small C helper (``kafka_batch.c``) that copies a batch of records straight into Arrow buffers: values and keys
as binary arrays, offsets and timestamps as int64 columns, in two calls per batch.

The helper is compiled on first use with the system C compiler against the librdkafka that confluent-kafka
bundles, and cached (``DAGGER_NATIVE_CACHE``, default ``~/.cache/dagger-on-spark``). Where no compiler is
found, or with ``DAGGER_KAFKA_NATIVE=0``, :class:`ConfluentFetcher` produces the same chunks from
confluent-kafka's ``consume()``: same results, slower. kafkarrow (a Rust Arrow consumer on PyPI) was
considered; it cannot start at a given offset or stop at one, which exactly-once ranges need.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kafka_batch.c")


class FetchError(RuntimeError):
    """librdkafka reported an error for the partition being read (the message is librdkafka's)."""


@dataclass
class Chunk:
    """Records of one fetch, in offset order, all below the range end."""

    values: pa.BinaryArray
    keys: pa.BinaryArray
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, ms since the epoch (-1: none)
    eof: bool  # the fetch reached the end of the partition

    def __len__(self) -> int:
        return len(self.offsets)

    def take(self, mask: np.ndarray) -> Chunk:
        """The records where ``mask`` is true."""
        arrow_mask = pa.array(mask)
        return Chunk(
            self.values.filter(arrow_mask),
            self.keys.filter(arrow_mask),
            self.offsets[mask],
            self.timestamps[mask],
            self.eof,
        )


class Fetcher(Protocol):
    """Reads one partition from a start offset, a batch at a time."""

    def fetch(self, max_records: int, timeout_s: float, end: int) -> Chunk:
        """At most ``max_records`` records with offsets below ``end``, waiting up to ``timeout_s`` for the first."""

    def close(self) -> None:
        """Leave the partition and free the client."""


def open_fetcher(config: dict[str, str], topic: str, partition: int, start: int) -> Fetcher:
    """The fastest fetcher available for ``topic``[``partition``] from offset ``start``."""
    library = native_library()
    if library is not None:
        return NativeFetcher(library, config, topic, partition, start)
    return ConfluentFetcher(config, topic, partition, start)


# -- the native fetcher -------------------------------------------------------------------------------------


class NativeFetcher:
    """A librdkafka consumer driven by ``kafka_batch.c``; see the module docstring."""

    def __init__(self, library: Any, config: dict[str, str], topic: str, partition: int, start: int):
        self._lib = library
        keys = [k.encode() for k in config]
        values = [str(v).encode() for v in config.values()]
        error = ctypes.create_string_buffer(512)
        self._handle = library.dk_open(
            (ctypes.c_char_p * len(keys))(*keys),
            (ctypes.c_char_p * len(values))(*values),
            len(keys),
            topic.encode(),
            partition,
            start,
            error,
            len(error),
        )
        if not self._handle:
            raise FetchError(error.value.decode(errors="replace"))
        self._value_bytes = ctypes.c_int64()
        self._key_bytes = ctypes.c_int64()
        self._eof = ctypes.c_int32()

    def fetch(self, max_records: int, timeout_s: float, end: int) -> Chunk:
        lib, ref = self._lib, ctypes.byref
        n = lib.dk_consume(
            self._handle,
            max_records,
            int(timeout_s * 1000),
            end,
            ref(self._value_bytes),
            ref(self._key_bytes),
            ref(self._eof),
        )
        if n < 0:
            raise FetchError(lib.dk_error(self._handle).decode(errors="replace"))
        offsets = np.empty(n, np.int64)
        timestamps = np.empty(n, np.int64)
        value_offsets = np.empty(n + 1, np.int32)
        key_offsets = np.empty(n + 1, np.int32)
        value_data = pa.allocate_buffer(max(self._value_bytes.value, 1))
        key_data = pa.allocate_buffer(max(self._key_bytes.value, 1))
        nulls = np.empty(n, np.uint8)
        lib.dk_fill(
            self._handle,
            offsets.ctypes.data,
            timestamps.ctypes.data,
            value_offsets.ctypes.data,
            value_data.address,
            key_offsets.ctypes.data,
            key_data.address,
            nulls.ctypes.data,
        )
        return Chunk(
            _binary(n, value_offsets, value_data, nulls, 1),
            _binary(n, key_offsets, key_data, nulls, 2),
            offsets,
            timestamps,
            bool(self._eof.value),
        )

    def close(self) -> None:
        if self._handle:
            self._lib.dk_close(self._handle)
            self._handle = None


def _binary(n: int, offsets: np.ndarray, data: pa.Buffer, nulls: np.ndarray, bit: int) -> pa.BinaryArray:
    """A binary array over ``offsets``/``data`` (no copy), null where ``nulls`` has ``bit`` set."""
    is_null = (nulls & bit) != 0
    validity = None
    null_count = int(is_null.sum())
    if null_count:
        validity = pa.py_buffer(np.packbits(~is_null, bitorder="little"))
    return pa.BinaryArray.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), data], null_count)


_LIBRARY: list[Any] = []  # [library or None] once resolved in this process


def native_library() -> Any | None:
    """The loaded helper, compiling it if needed; ``None`` (with one warning) when it cannot be had."""
    if not _LIBRARY:
        try:
            _LIBRARY.append(_load() if os.environ.get("DAGGER_KAFKA_NATIVE", "1") != "0" else None)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            log.warning("the columnar Kafka reader is unavailable (%s); reading through confluent-kafka instead", exc)
            _LIBRARY.append(None)
    return _LIBRARY[0]


def _librdkafka() -> str:
    import confluent_kafka

    package = Path(confluent_kafka.__file__).resolve().parent
    found = sorted(glob.glob(str(package.parent / "confluent_kafka.libs" / "librdkafka*.so*")))
    if found:
        return found[0]
    import ctypes.util

    system = ctypes.util.find_library("rdkafka")
    if system is None:
        raise RuntimeError("no librdkafka found next to confluent_kafka or on the system")
    return system


def _load() -> Any:
    rdkafka = _librdkafka()
    ctypes.CDLL(rdkafka, mode=ctypes.RTLD_GLOBAL)  # the helper's librdkafka symbols resolve to this copy
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + rdkafka.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("DAGGER_NATIVE_CACHE", Path.home() / ".cache" / "dagger-on-spark"))
    target = cache / f"kafka_batch-{digest}.so"
    if not target.exists():
        _compile(target)
    library = ctypes.CDLL(str(target))
    pointer, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    library.dk_open.restype = pointer
    library.dk_open.argtypes = [
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_int,
        ctypes.c_char_p,
        i32,
        i64,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    library.dk_consume.restype = i64
    library.dk_consume.argtypes = [pointer, i64, ctypes.c_int, i64, pointer, pointer, pointer]
    library.dk_fill.restype = None
    library.dk_fill.argtypes = [pointer] * 8
    library.dk_error.restype = ctypes.c_char_p
    library.dk_error.argtypes = [pointer]
    library.dk_close.restype = None
    library.dk_close.argtypes = [pointer]
    return library


def _compile(target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) to build the columnar Kafka reader; install gcc")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        command = [compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(SOURCE)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()[:500]}")
        os.replace(built, target)  # atomic: concurrent workers never load a half-written file


# -- the portable fetcher -----------------------------------------------------------------------------------


class ConfluentFetcher:
    """The same chunks from confluent-kafka's ``consume()``, one ``Message`` object per record."""

    def __init__(self, config: dict[str, str], topic: str, partition: int, start: int):
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        try:
            self._consumer = Consumer(config)
            self._consumer.assign([TopicPartition(topic, partition, start)])
        except KafkaException as exc:
            raise FetchError(str(exc.args[0] if exc.args else exc)) from exc

    def fetch(self, max_records: int, timeout_s: float, end: int) -> Chunk:
        from confluent_kafka import KafkaError

        messages = self._consumer.consume(max_records, timeout=timeout_s)
        eof = False
        failed = [m for m in messages if m.error() is not None]
        if failed:
            for m in failed:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise FetchError(str(m.error()))
            eof = True
            messages = [m for m in messages if m.error() is None]
        if messages and messages[-1].offset() >= end:  # offsets only grow within a partition
            messages = [m for m in messages if m.offset() < end]
        return Chunk(
            pa.array([m.value() for m in messages], pa.binary()),
            pa.array([m.key() for m in messages], pa.binary()),
            np.array([m.offset() for m in messages], np.int64),
            np.array([m.timestamp()[1] for m in messages], np.int64),
            eof,
        )

    def close(self) -> None:
        self._consumer.close()
