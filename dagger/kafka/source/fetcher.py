"""Columnar reads of one Kafka partition range: each fetch is a :class:`Chunk` of Arrow arrays, not messages.

:class:`NativeFetcher` reads through the C helper of :mod:`dagger.kafka.native` (librdkafka's
``rd_kafka_consume_batch_queue`` copied straight into Arrow buffers: values and keys as binary arrays, offsets
and timestamps as int64 columns, in two calls per batch). Where the helper is unavailable,
:class:`ConfluentFetcher` produces the same chunks from confluent-kafka's ``consume()``, one ``Message`` object
per record: same results, slower.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from dagger.kafka.native import config_arrays, kafka_exception_text, native_library
from dagger.librdkafka_logs import quiet


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
    """A librdkafka consumer driven by the C helper of :mod:`dagger.kafka.native`."""

    def __init__(self, library: Any, config: dict[str, str], topic: str, partition: int, start: int):
        self._lib = library
        error = ctypes.create_string_buffer(512)
        self._handle = library.dk_open(*config_arrays(config), topic.encode(), partition, start, error, len(error))
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
        if getattr(self, "_handle", None):
            self._lib.dk_close(self._handle)
            self._handle = None

    def __del__(self) -> None:
        self.close()


def _binary(n: int, offsets: np.ndarray, data: pa.Buffer, nulls: np.ndarray, bit: int) -> pa.BinaryArray:
    """A binary array over ``offsets``/``data`` (no copy), null where ``nulls`` has ``bit`` set."""
    is_null = (nulls & bit) != 0
    validity = None
    null_count = int(is_null.sum())
    if null_count:
        validity = pa.py_buffer(np.packbits(~is_null, bitorder="little"))
    return pa.BinaryArray.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), data], null_count)


# -- the portable fetcher -----------------------------------------------------------------------------------


class ConfluentFetcher:
    """The same chunks from confluent-kafka's ``consume()``, one ``Message`` object per record."""

    def __init__(self, config: dict[str, str], topic: str, partition: int, start: int):
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        try:
            self._consumer = Consumer(quiet(config))
            self._consumer.assign([TopicPartition(topic, partition, start)])
        except KafkaException as exc:
            raise FetchError(kafka_exception_text(exc)) from exc

    def fetch(self, max_records: int, timeout_s: float, end: int) -> Chunk:
        """As the native helper: done at ``max_records``, at the record before ``end``, past it, or at the
        partition's end, reading in short slices (``consume`` alone waits for all it asked for)."""

        from confluent_kafka import KafkaError

        deadline = time.monotonic() + timeout_s
        messages: list = []
        eof = False
        while True:
            left = max(0.0, deadline - time.monotonic())
            for m in self._consumer.consume(max_records - len(messages), timeout=min(left, 0.005)):
                if m.error() is None:
                    messages.append(m)
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
                else:
                    raise FetchError(str(m.error()))
            done = messages and messages[-1].offset() >= end - 1
            if eof or done or len(messages) >= max_records or left == 0:
                break
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
