"""Produce Arrow binary arrays to Kafka: one librdkafka batch call per array, no Python object per record.

:class:`NativeProducer` hands the array's buffers to the C helper of :mod:`dagger.kafka.native`
(``rd_kafka_produce_batch`` with copy semantics). :class:`ConfluentProducer` does the same through
confluent-kafka's ``produce_batch`` (a dict per record) where the helper is unavailable. Both wait out a full
local queue, raise :class:`ProduceError` when librdkafka refuses a record for another reason, and collect
delivery failures for :meth:`BatchProducer.take_failed`; configure ``delivery.report.only.error`` so that only
failures are reported back.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from dagger.kafka.native import config_arrays, kafka_exception_text, native_library
from dagger.librdkafka_logs import quiet

# settings confluent-kafka's Python client reads itself; librdkafka does not know them (the helper reports
# failed deliveries only, so only-error delivery reports are its behaviour anyway)
PYTHON_CLIENT_ONLY = {"delivery.report.only.error", "on_delivery", "error_cb", "stats_cb", "throttle_cb", "logger"}


class ProduceError(RuntimeError):
    """librdkafka refused a record (the message is librdkafka's)."""


class BatchProducer(Protocol):
    """A producer to one topic."""

    def produce(self, values: pa.BinaryArray, keys: pa.BinaryArray | None = None, partition: int | None = None):
        """Enqueue one record per value (with the key at the same index); ``partition`` None: the partitioner."""

    def flush(self, timeout_s: float) -> int:
        """Wait for the deliveries of everything enqueued; returns how many are still undelivered."""

    def take_failed(self) -> tuple[int, str]:
        """Deliveries that failed since the last call, and the first failure's reason."""

    def close(self, timeout_s: float = 10.0) -> None:
        """Wait up to ``timeout_s`` for outstanding deliveries, then free the client."""


def open_producer(config: dict[str, Any], topic: str) -> BatchProducer:
    """The fastest producer available for ``topic``."""
    library = native_library()
    if library is not None:
        return NativeProducer(library, config, topic)
    return ConfluentProducer(config, topic)


class NativeProducer:
    """A librdkafka producer driven by the C helper of :mod:`dagger.kafka.native`."""

    def __init__(self, library: Any, config: dict[str, Any], topic: str):
        self._lib = library
        error = ctypes.create_string_buffer(512)
        settings = {k: v for k, v in config.items() if k not in PYTHON_CLIENT_ONLY}
        self._handle = library.dk_producer_open(*config_arrays(settings), topic.encode(), error, len(error))
        if not self._handle:
            raise ProduceError(error.value.decode(errors="replace"))

    def produce(self, values: pa.BinaryArray, keys: pa.BinaryArray | None = None, partition: int | None = None):
        n = len(values)
        if n == 0:
            return
        value_offsets, value_data, nulls = _buffers(values)
        key_offsets = key_data = None
        if keys is not None:
            key_offsets, key_data, key_nulls = _buffers(keys)
            if key_nulls is not None:
                nulls = (nulls if nulls is not None else np.zeros(n, np.uint8)) | (key_nulls << 1)
        code = self._lib.dk_produce(
            self._handle,
            -1 if partition is None else partition,
            n,
            value_offsets,
            value_data,
            key_offsets,
            key_data,
            None if nulls is None else nulls.ctypes.data,
        )
        if code != 0:
            raise ProduceError(self._lib.dk_producer_error(self._handle).decode(errors="replace"))

    def flush(self, timeout_s: float) -> int:
        return self._lib.dk_producer_flush(self._handle, int(timeout_s * 1000))

    def take_failed(self) -> tuple[int, str]:
        failed = self._lib.dk_producer_take_failed(self._handle)
        return failed, self._lib.dk_producer_error(self._handle).decode(errors="replace") if failed else ""

    def close(self, timeout_s: float = 10.0) -> None:
        if getattr(self, "_handle", None):
            self._lib.dk_producer_close(self._handle, int(timeout_s * 1000))
            self._handle = None

    def __del__(self) -> None:  # a task that failed before flushing: free the client, drop what is queued
        self.close(0)


def _buffers(array: pa.BinaryArray) -> tuple[int, int, np.ndarray | None]:
    """Addresses of the offsets (int32, sliced to the array) and data of ``array``, and 1 where it is null."""
    if array.type != pa.binary():
        array = array.cast(pa.binary())
    _, offsets, data = array.buffers()
    offsets_address = offsets.address + array.offset * 4
    data_address = data.address if data is not None else 0
    nulls = None
    if array.null_count:
        nulls = array.is_null().to_numpy(zero_copy_only=False).astype(np.uint8)
    return offsets_address, data_address, nulls


class ConfluentProducer:
    """The same through confluent-kafka's ``produce_batch``, one dict per record."""

    def __init__(self, config: dict[str, Any], topic: str):
        from confluent_kafka import KafkaException, Producer

        try:
            self._producer = Producer(quiet(config))
        except KafkaException as exc:
            raise ProduceError(kafka_exception_text(exc)) from exc
        self._topic = topic
        self._failed = 0
        self._first = ""

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._first = self._first or str(err)
            self._failed += 1

    def produce(self, values: pa.BinaryArray, keys: pa.BinaryArray | None = None, partition: int | None = None):
        from confluent_kafka import KafkaError

        if keys is None:
            pending = [{"value": v} for v in values.to_pylist()]
        else:
            pending = [{"value": v, "key": k} for v, k in zip(values.to_pylist(), keys.to_pylist(), strict=True)]
        extra = {} if partition is None else {"partition": partition}
        while pending:
            self._producer.produce_batch(self._topic, pending, on_delivery=self._on_delivery, **extra)
            refused = [m for m in pending if "_error" in m]
            for m in refused:
                if m["_error"].code() != KafkaError._QUEUE_FULL:
                    raise ProduceError(str(m["_error"]))
                del m["_error"]
            pending = refused
            self._producer.poll(0.05 if refused else 0)

    def flush(self, timeout_s: float) -> int:
        return self._producer.flush(timeout_s)

    def take_failed(self) -> tuple[int, str]:
        failed, first = self._failed, self._first
        self._failed, self._first = 0, ""
        return failed, first

    def close(self, timeout_s: float = 10.0) -> None:
        if timeout_s <= 0:
            self._producer.purge()  # as the native producer: what is still queued is dropped
        self._producer.flush(timeout_s)
