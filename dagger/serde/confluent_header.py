"""Confluent's wire format as a writer makes it: the header before each record (magic byte, schema id, for protobuf
the message-index array) and the index path of a message in its schema's file. Read column-wise by
:mod:`dagger.serde.confluent`."""

from __future__ import annotations

from typing import Any


def header(schema_id: int, path: tuple[int, ...] | None = None) -> bytes:
    """Confluent's header: magic byte 0, the id, and for protobuf the message-index array (``[0]`` as ``0x00``)."""
    out = b"\0" + schema_id.to_bytes(4, "big")
    if path is None:
        return out
    if path == (0,):
        return out + b"\0"
    return out + b"".join(_zigzag(n) for n in (len(path), *path))


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def message_path(file_descriptor: bytes, full_name: str) -> tuple[int, ...] | None:
    """The index path of message ``full_name`` in a serialized ``FileDescriptorProto``; None when absent."""
    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto.FromString(file_descriptor)
    prefix = f"{file.package}." if file.package else ""

    def walk(messages: Any, name: str, path: tuple[int, ...]) -> tuple[int, ...] | None:
        for i, message in enumerate(messages):
            here = f"{name}{message.name}"
            if here == full_name:
                return (*path, i)
            found = walk(message.nested_type, f"{here}.", (*path, i))
            if found is not None:
                return found
        return None

    return walk(file.message_type, prefix, ())


def framed(values: Any, header: bytes | None) -> Any:
    """``values`` (an Arrow binary array) behind Confluent's header (as they are without one), column-wise."""
    if header is None:
        return values
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(pa.scalar(header, pa.binary()), values, pa.scalar(b"", pa.binary()))
