"""Protobuf and JSON records in Confluent's wire format, decoded by today's decoders of their data type once the
headers are read (:mod:`dagger.serde.confluent`). Runs in the Python reader (executors)."""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa

from dagger.errors import DescriptorFetchError
from dagger.schema.confluent import ConfluentSettings, schema_by_id
from dagger.serde.confluent import payloads, read_frames


class ConfluentDecoder:
    """Protobuf or JSON records in Confluent's wire format: headers read column-wise, then each group of records
    (one writer schema id, one message path) decoded by today's decoder of the stream's data type, with the same
    contract (one row per record, invalid ones flagged with their reasons).

    A protobuf record's message-index path is looked up in its writer schema's file (``writers``: schema id →
    serialized ``FileDescriptorProto`` s, imports first; an id not among them is fetched from the registry once per
    process): it must name the stream's message, whose descriptor decodes it (protobuf's own evolution rules). A
    JSON record is read by the reader schema's properties whatever its id, once the registry knows the id.
    """

    def __init__(
        self,
        inner: object,
        protobuf: bool,
        writers: dict[int, list[bytes]],
        confluent: dict,
        message: str | None = None,
    ):
        self.inner = inner
        self.protobuf = protobuf
        self.rowtime = inner.rowtime
        self.rowtime_source = inner.rowtime_source
        self.spark_schema = inner.spark_schema
        self.arrow_schema = inner.arrow_schema
        self._verdicts = ConfluentVerdicts(protobuf, writers, confluent, message)

    def decode(self, values: pa.BinaryArray | list) -> object:
        from dagger.serde.decode import DecodeResult, validity_and_rowtime  # start-up: loads google, pyspark

        if not isinstance(values, pa.Array):
            values = pa.array(values, pa.binary())
        frames = read_frames(values, protobuf=self.protobuf)
        reasons = dict(frames.bad)
        parts: list[pa.RecordBatch] = []
        order: list[np.ndarray] = []
        for (schema_id, path_at, start), positions in frames.groups().items():
            path = frames.path_table[path_at] if self.protobuf else ()
            why = self._verdicts.verdict(schema_id, path)
            if why is not None:
                reasons.update({int(i): why for i in positions})
                continue
            result = self.inner.decode(payloads(values, start, positions))
            reasons.update({int(positions[i]): r for i, r in zip(result.invalid, result.reasons, strict=True)})
            parts.append(result.batch)
            order.append(positions)
        covered = np.zeros(len(values), dtype=bool)
        for positions in order:
            covered[positions] = True
        rest = np.flatnonzero(~covered)
        if len(rest):  # records that are not decoded: empty ones stand in for them (flagged invalid below)
            parts.append(self.inner.decode(pa.array([b""] * len(rest), pa.binary())).batch)
            order.append(rest)
        invalid = sorted(reasons)
        if not parts:
            batch = self.inner.decode(pa.array([], pa.binary())).batch
        else:
            batch = pa.Table.from_batches(parts).combine_chunks().to_batches()[0] if len(parts) > 1 else parts[0]
            everything = np.concatenate(order)
            if len(parts) > 1 or not (everything == np.arange(len(everything))).all():
                batch = batch.take(pa.array(np.argsort(everything, kind="stable")))
        if invalid:
            rowtime = batch.column(len(batch.schema) - 1)
            tail = validity_and_rowtime(len(values), invalid, rowtime)
            batch = pa.RecordBatch.from_arrays([*batch.columns[:-2], *tail], schema=batch.schema)
        return DecodeResult(batch, invalid, [reasons[i] for i in invalid])


class ConfluentVerdicts:
    """Whether records of a schema id and message-index path are the stream's: the id must be one of the subject's
    (``writers``: the versions known at start; an id not among them is looked up in the registry once per
    process), and, for protobuf, the path must name the stream's ``message`` in that version's file."""

    def __init__(self, protobuf: bool, writers: dict[int, list[bytes]], confluent: dict, message: str | None = None):
        self.protobuf = protobuf
        self.writers = writers
        self.confluent = confluent
        self.message = message
        self._verdicts: dict[tuple[int, tuple[int, ...]], str | None] = {}  # (id, path) → None, or why invalid

    def verdict(self, schema_id: int, path: tuple[int, ...]) -> str | None:
        """None when records of ``schema_id`` with message ``path`` are the stream's; else why they are not."""
        key = (schema_id, path)
        if key in self._verdicts:
            return self._verdicts[key]
        why, final = self._judge(schema_id, path)
        if final:  # a registry that cannot be asked now is asked again for the next records
            self._verdicts[key] = why
        return why

    def _judge(self, schema_id: int, path: tuple[int, ...]) -> tuple[str | None, bool]:
        files = self.writers.get(schema_id)
        if files is None:
            kind = "PROTOBUF" if self.protobuf else "JSON"
            try:
                entry = schema_by_id(ConfluentSettings(**self.confluent), schema_id, kind)
            except LookupError as exc:
                return f"unknown schema id {schema_id}: {exc}", True
            except DescriptorFetchError as exc:
                return f"schema id {schema_id} cannot be looked up: {exc}", False

            files = [base64.b64decode(t) for t in entry["references"].values()] + [base64.b64decode(entry["schema"])]
            if not self.protobuf:
                files = []
            self.writers[schema_id] = files
        if not self.protobuf:
            return None, True
        name = message_at(files[-1], path)
        if name is None:
            return f"message index {list(path)} names no message in schema id {schema_id}", True
        if name != self.message:
            return (
                f"message index {list(path)} of schema id {schema_id} names {name}; this stream reads {self.message}",
                True,
            )
        return None, True


def message_at(file_descriptor: bytes, path: tuple[int, ...]) -> str | None:
    """The full name of the message at ``path`` (top-level index, then nested indexes) in a serialized
    ``FileDescriptorProto``; None when there is none."""
    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto.FromString(file_descriptor)
    messages = file.message_type
    names = [file.package] if file.package else []
    for index in path:
        if index >= len(messages):
            return None
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(names)
