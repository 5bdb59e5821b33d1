"""A sink's records kept instead of sent, for ``dagger test``: the sink's writer runs as in production (its
encoder, its refused rows, its dead letters) and only the transport is replaced. A sink whose ``capture`` names a
directory (:class:`~dagger.plugins.sink.Sink`) writes there.

:class:`SpoolProducer` stands for the Kafka sink's librdkafka producer (runs in the sink's task, on the
executors): what it is given is written, at flush, as one Arrow file per task of the micro-batch;
:func:`read_spool` reads a sink's files back in batch and partition order (runs on the driver, after the run).
The other sinks keep what they would send the same way (:func:`keep`, :func:`read_spool_rows`): the log sink its
rows, the InfluxDB sink its lines, the BigQuery sink the Arrow rows its encoder made.
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
        self.name = spool_name(batch_id, partition_id)
        self.batches: list[pa.RecordBatch] = []

    def produce(self, values: pa.BinaryArray, keys: pa.BinaryArray | None = None, partition: int | None = None):  # noqa: ARG002
        keys = keys if keys is not None else pa.nulls(len(values), pa.binary())
        self.batches.append(
            pa.RecordBatch.from_arrays([values.cast(pa.binary()), keys.cast(pa.binary())], schema=SPOOL_SCHEMA)
        )

    def flush(self, timeout_s: float) -> int:  # noqa: ARG002 - nothing to wait for
        """Write what was produced; 0 records left undelivered, as librdkafka's flush says."""
        write_spool(self.directory, self.name, self.batches, SPOOL_SCHEMA)
        self.batches = []
        return 0

    def take_failed(self) -> tuple[int, str]:
        return 0, ""

    def close(self, timeout_s: float = 0) -> None:  # noqa: ARG002
        self.batches = []


def spool_name(batch_id: int, partition_id: int) -> str:
    """A task's file: batch, then partition order when sorted by name."""
    return f"{batch_id:08d}-{partition_id:06d}-{uuid.uuid4().hex[:8]}.arrow"


def write_spool(directory: str, name: str, batches: list[pa.RecordBatch], schema: pa.Schema) -> None:
    """One task's batches as the Arrow file ``name`` in ``directory`` (whole, or not there)."""
    os.makedirs(directory, exist_ok=True)
    partial = os.path.join(directory, f".{name}")
    with pa.OSFile(partial, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    os.replace(partial, os.path.join(directory, name))


def keep(directory: str, batch_id: int, partition_id: int, batches: list[pa.RecordBatch]) -> None:
    """A captured writer's batches of one task, kept at its flush (nothing when it had none)."""
    if batches:
        write_spool(directory, spool_name(batch_id, partition_id), batches, batches[0].schema)


def _tables(directory: str) -> list[pa.Table]:
    """Each task's file, in batch, then partition order."""
    paths = sorted(Path(directory).glob("*.arrow")) if os.path.isdir(directory) else []
    return [pa.ipc.open_file(pa.memory_map(str(path))).read_all() for path in paths]


def read_spool_rows(directory: str) -> list[dict]:
    """Every row a captured sink kept, in batch, then partition order."""
    return [row for table in _tables(directory) for row in table.to_pylist()]


def read_spool(directory: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every ``(value, key)`` a captured sink wrote, in batch, then partition order."""
    return [(row["value"], row["key"]) for row in read_spool_rows(directory)]
