"""Confluent's wire format, read column-wise: magic byte ``0``, the 4-byte big-endian schema id, for protobuf the
message-index array (its length and each index as zig-zag varints; a lone ``0x00`` means ``[0]``), then the
payload.

:func:`read_frames` looks at a whole Arrow binary column at once with numpy: no Python object per record,
except for protobuf records whose index array is unusual (an index past 63, or more than seven of them), which
are read one by one. A record that is not in the format gets a reason naming what is wrong with it and is left
to the stream's invalid-record policy; :func:`payloads` cuts the headers off the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the header before every payload: magic byte and schema id
HEADER = 5
#: the longest index array read column-wise (longer ones are read one record at a time)
_FAST_INDEXES = 7


@dataclass
class Frames:
    """What the headers of a column of records say."""

    ids: np.ndarray  # int64 schema id per record; -1 where the record is not framed
    starts: np.ndarray  # int64: where each payload starts within its record
    bad: dict[int, str] = field(default_factory=dict)  # record position → why it is not in the format
    paths: np.ndarray | None = None  # protobuf: per record, a position in ``path_table`` (-1: bad)
    path_table: list[tuple[int, ...]] = field(default_factory=list)

    def groups(self) -> dict[tuple[int, int, int], np.ndarray]:
        """The good records' positions by (schema id, message path's position in ``path_table`` (0 when not
        protobuf), header length), in the order they come."""
        good = np.flatnonzero(self.ids >= 0)
        if not len(good):
            return {}
        paths = self.paths[good] if self.paths is not None else np.zeros(len(good), dtype=np.int64)
        keys = (self.ids[good] << 24) | (paths << 8) | self.starts[good]  # ids < 2**31, paths < 2**16, starts < 256
        first = keys[0]
        if (keys == first).all():
            return {(int(self.ids[good[0]]), int(paths[0]), int(self.starts[good[0]])): good}
        unique, inverse = np.unique(keys, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(unique) + 1))
        return {
            (int(key >> 24), int((key >> 8) & 0xFFFF), int(key & 0xFF)): good[order[bounds[i] : bounds[i + 1]]]
            for i, key in enumerate(unique)
        }


def _layout(values: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets, data, valid)`` of a binary column, offsets as int64 from its own first byte."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type == pa.large_binary():
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset : values.offset + len(values) + 1]
    else:
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset : values.offset + len(values) + 1]
    data_buffer = values.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, dtype=np.uint8)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    return offsets.astype(np.int64), data, valid


def read_frames(values: pa.BinaryArray, protobuf: bool = False) -> Frames:
    """Read the headers of ``values`` (nulls are tombstones)."""
    offsets, data, valid = _layout(values)
    n = len(offsets) - 1
    begins = offsets[:-1]
    lengths = offsets[1:] - begins
    ids = np.full(n, -1, dtype=np.int64)
    starts = np.full(n, HEADER, dtype=np.int64)
    bad: dict[int, str] = {}
    framed = valid & (lengths >= HEADER)
    magic = np.zeros(n, dtype=np.int64)
    has_byte = valid & (lengths >= 1)
    magic[has_byte] = data[begins[has_byte]]
    for i in np.flatnonzero(~valid):
        bad[int(i)] = "record value is null (tombstone)"
    for i in np.flatnonzero(valid & ~framed & ((lengths < 1) | (magic == 0))):
        bad[int(i)] = f"{int(lengths[i])} bytes, shorter than the 5-byte header of Confluent's wire format"
    guid = has_byte & (magic == 1)
    for i in np.flatnonzero(guid):
        bad[int(i)] = (
            "magic byte 1: the schema is named by a GUID (Confluent's V1 wire format), which is not read yet; "
            "producers must write the 4-byte schema id (magic byte 0)"
        )
    other = has_byte & (magic != 0) & (magic != 1)
    for i in np.flatnonzero(other):
        bad[int(i)] = (
            f"magic byte {int(magic[i])}, not 0: the record is not in Confluent's wire format (a producer that "
            "puts the schema id in a record header leaves the payload unframed: that is not read)"
        )
    ok = framed & (magic == 0)
    at = begins[ok]
    ids[ok] = (
        (data[at + 1].astype(np.int64) << 24)
        | (data[at + 2].astype(np.int64) << 16)
        | (data[at + 3].astype(np.int64) << 8)
        | data[at + 4].astype(np.int64)
    )
    frames = Frames(ids, starts, bad)
    if protobuf:
        _read_indexes(frames, data, begins, lengths)
    return frames


def _read_indexes(frames: Frames, data: np.ndarray, begins: np.ndarray, lengths: np.ndarray) -> None:
    """Read each protobuf record's message-index array into ``frames.paths``/``path_table``."""
    ids = frames.ids
    n = len(ids)
    paths = np.full(n, -1, dtype=np.int64)
    table: dict[tuple[int, ...], int] = {}
    framed = ids >= 0
    short = framed & (lengths <= HEADER)
    for i in np.flatnonzero(short):
        frames.bad[int(i)] = "no message-index array after the schema id (a protobuf record needs at least 0x00)"
    ids[short] = -1
    framed &= ~short
    first = np.zeros(n, dtype=np.int64)
    first[framed] = data[begins[framed] + HEADER]
    shortcut = framed & (first == 0)
    if shortcut.any():
        table[(0,)] = 0
        paths[shortcut] = 0
        frames.starts[shortcut] = HEADER + 1
    rest = framed & ~shortcut
    count = first >> 1
    simple = rest & (first < 0x80) & (first % 2 == 0) & (count <= _FAST_INDEXES) & (lengths > HEADER + count)
    key = count.copy()
    for k in range(_FAST_INDEXES):
        has = simple & (count > k)
        byte = np.zeros(n, dtype=np.int64)
        byte[has] = data[begins[has] + HEADER + 1 + k]
        simple &= ~has | ((byte < 0x80) & (byte % 2 == 0))
        key |= byte << (8 * (k + 1))
    if simple.any():
        for value in np.unique(key[simple]):
            size = int(value & 0xFF)
            path = tuple(int((value >> (8 * (k + 1))) & 0xFF) >> 1 for k in range(size))
            table.setdefault(path, len(table))
            members = simple & (key == value)
            paths[members] = table[path]
            frames.starts[members] = HEADER + 1 + size
    for i in np.flatnonzero(rest & ~simple):  # rare: long varints, long arrays, or not an index array at all
        record = data[begins[i] : begins[i] + lengths[i]].tobytes()
        try:
            path, start = _indexes(record, HEADER)
        except ValueError as exc:
            frames.bad[int(i)] = f"unreadable message-index array: {exc}"
            ids[i] = -1
            continue
        table.setdefault(path, len(table))
        paths[i] = table[path]
        frames.starts[i] = start
    frames.paths = paths
    frames.path_table = [p for p, _ in sorted(table.items(), key=lambda item: item[1])]


def _varint(record: bytes, at: int) -> tuple[int, int]:
    """A zig-zag varint at ``at``: ``(value, next position)``."""
    shift = result = 0
    while True:
        if at >= len(record):
            raise ValueError("the record ends inside a varint")
        byte = record[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _indexes(record: bytes, at: int) -> tuple[tuple[int, ...], int]:
    """The message-index array at ``at``: ``(path, where the message starts)``."""
    count, at = _varint(record, at)
    if count == 0:
        return (0,), at
    if count < 0 or count > 100:
        raise ValueError(f"{count} indexes")
    path = []
    for _ in range(count):
        index, at = _varint(record, at)
        if index < 0:
            raise ValueError(f"a negative index {index}")
        path.append(index)
    return tuple(path), at


def payloads(values: pa.BinaryArray, start: int, positions: np.ndarray | None = None) -> pa.BinaryArray:
    """The payloads of the records at ``positions`` (all when None), whose headers are ``start`` bytes long."""
    if positions is not None and len(positions) != len(values):
        values = values.take(pa.array(positions))
    return pc.binary_slice(values, start, 2**31 - 1)
