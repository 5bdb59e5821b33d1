"""A sink's records kept instead of sent, for ``dagger test``: the sink's writer runs as in production (its
encoder, its refused rows, its dead letters) and only the transport is replaced. A sink whose ``capture`` names a
directory (:class:`~dagger.plugins.sink.Sink`) writes there.

:class:`SpoolProducer` stands for the Kafka sink's librdkafka producer (runs in the sink's task, on the
executors): what it is given is written, at flush, as one Arrow file per task of the micro-batch;
:func:`read_spool` reads a sink's files back in batch and partition order (runs on the driver, after the run).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa

SPOOL_SCHEMA = pa.schema([("value", pa.binary()), ("key", pa.binary())])


class SpoolProducer:
    """The producer's calls (``produce``, ``flush``, ``take_failed``, ``close``), writing to ``directory``."""

    def __init__(self, directory: str, batch_id: int, partition_id: int):
        self.directory = directory
        self.name = f"{batch_id:08d}-{partition_id:06d}-{uuid.uuid4().hex[:8]}.arrow"
        self.batches: list[pa.RecordBatch] = []

    def produce(self, values: pa.BinaryArray, keys: pa.BinaryArray | None = None, partition: int | None = None):  # noqa: ARG002
        keys = keys if keys is not None else pa.nulls(len(values), pa.binary())
        self.batches.append(
            pa.RecordBatch.from_arrays([values.cast(pa.binary()), keys.cast(pa.binary())], schema=SPOOL_SCHEMA)
        )

    def flush(self, timeout_s: float) -> int:  # noqa: ARG002 - nothing to wait for
        """Write what was produced; 0 records left undelivered, as librdkafka's flush says."""
        os.makedirs(self.directory, exist_ok=True)
        partial = os.path.join(self.directory, f".{self.name}")
        with pa.OSFile(partial, "wb") as sink, pa.ipc.new_file(sink, SPOOL_SCHEMA) as writer:
            for batch in self.batches:
                writer.write_batch(batch)
        os.replace(partial, os.path.join(self.directory, self.name))  # whole, or not there
        self.batches = []
        return 0

    def take_failed(self) -> tuple[int, str]:
        return 0, ""

    def close(self, timeout_s: float = 0) -> None:  # noqa: ARG002
        self.batches = []


def read_spool(directory: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every ``(value, key)`` a captured sink wrote, in batch, then partition order."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for path in sorted(Path(directory).glob("*.arrow")) if os.path.isdir(directory) else []:
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        out += list(zip(table.column("value").to_pylist(), table.column("key").to_pylist(), strict=True))
    return out
