"""Confluent's wire format read column-wise (dagger.serde.confluent): the byte layouts Confluent documents and every
kind of bad framing (records written against a registry: tests/integration/serde/test_confluent_registry.py)."""

from __future__ import annotations

import pyarrow as pa

from dagger.serde.confluent_decode import payloads, read_frames

#: (message indexes, the bytes after magic byte and schema id 42), as confluent-kafka 2.12's SchemaId writes them
GOLDEN = [
    ((0,), b"\x00"),
    ((1,), b"\x02\x02"),
    ((1, 0), b"\x04\x02\x00"),
    ((0, 2), b"\x04\x00\x04"),
    ((70,), b"\x02\x8c\x01"),
]


def test_message_indexes_read_as_confluent_writes_them():
    values = pa.array([b"\x00\x00\x00\x00\x2a" + prefix + b"payload" for _, prefix in GOLDEN], pa.binary())
    frames = read_frames(values, protobuf=True)
    assert frames.bad == {}
    assert list(frames.ids) == [42] * 5
    assert [frames.path_table[p] for p in frames.paths] == [path for path, _ in GOLDEN]
    for (_, _, start), positions in frames.groups().items():
        assert payloads(values, start, positions).to_pylist() == [b"payload"] * len(positions)
    # the long form of [0] (length 1, index 0) is [0] too
    long_form = read_frames(pa.array([b"\x00\x00\x00\x00\x2a\x02\x00x"], pa.binary()), protobuf=True)
    assert long_form.path_table == [(0,)] and list(long_form.starts) == [7]


def test_bad_framing_gets_a_reason_naming_what_is_wrong():
    values = pa.array(
        [
            None,
            b"",
            b"\x00\x00\x01",
            b"\x01" + b"\x00" * 20,
            b"\x07\x00\x00\x00\x01abc",
            b"\x00\x00\x00\x00\x01",  # protobuf: no index array
            b"\x00\x00\x00\x00\x01\x03",  # protobuf: a negative count
            b"\x00\x00\x00\x00\x05\x00ok",
        ],
        pa.binary(),
    )
    frames = read_frames(values, protobuf=True)
    assert frames.bad[0] == "record value is null (tombstone)"
    assert frames.bad[1].startswith("0 bytes, shorter than the 5-byte header")
    assert frames.bad[2].startswith("3 bytes, shorter than the 5-byte header")
    assert "magic byte 1: the schema is named by a GUID" in frames.bad[3]
    assert frames.bad[4].startswith("magic byte 7, not 0")
    assert frames.bad[5].startswith("no message-index array")
    assert frames.bad[6] == "unreadable message-index array: -2 indexes"
    assert sorted(frames.bad) == [0, 1, 2, 3, 4, 5, 6]
    assert list(frames.ids) == [-1] * 7 + [5]
    avro = read_frames(values)
    assert sorted(avro.bad) == [0, 1, 2, 3, 4] and list(avro.ids[5:]) == [1, 1, 5]
