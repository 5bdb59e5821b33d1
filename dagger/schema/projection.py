"""Column pruning for protobuf sources: decode only the fields the job's SQL can read.

Spark's Python streaming sources get no column pruning from the optimizer (``DataSourceStreamReader`` has no
``pruneColumns``), so every field of the message would be decoded, handed to the JVM and converted to
Spark rows, only for the query to drop most of them. The SQL is known before the query starts, so the job
prunes by itself:

* :func:`source_fields` picks the top-level fields of a table's message whose names appear anywhere in the
  query (any identifier counts: a column, a struct field, an alias; matching is case-insensitive as Spark's
  resolution). It gives up, keeping everything, when the query selects ``*`` (``COUNT(*)`` is fine).
* :func:`prune_message` copies a descriptor set with the other fields removed from that message. Field
  numbers stay, so the records are read unchanged: protobuf skips fields a descriptor does not know.

The table keeps its full schema for everything that reports it (``dagger plan``, checkpoint compatibility);
only what the reader decodes shrinks. Records are then validated in the fields that are read (a record whose
only defect is in an unread field is accepted); ``SPARK_PRUNE_INPUT_COLUMNS=false`` turns pruning off.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor


def source_fields(descriptor: Descriptor, used: set[str] | None, rowtime_field_number: int | None) -> list[str] | None:
    """The fields of ``descriptor`` to decode, or ``None`` for all of them.

    Parameters
    ----------
    descriptor:
        The table's message type.
    used:
        Lower-cased names the query mentions (:func:`dagger.sql.rewrite.referenced_columns`); ``None`` means
        the query may read every column.
    rowtime_field_number:
        The event-time field, always kept (it becomes ``rowtime``).
    """
    if used is None:
        return None
    keep = [f.name for f in descriptor.fields if f.name.lower() in used or f.number == rowtime_field_number]
    return None if len(keep) == len(descriptor.fields) else keep


def prune_message(
    fds: descriptor_pb2.FileDescriptorSet, message_name: str, keep: list[str]
) -> descriptor_pb2.FileDescriptorSet:
    """A copy of ``fds`` in which message ``message_name`` has only the fields ``keep`` (numbers unchanged).

    Oneofs left without a member are removed, and the remaining members point at their oneof's new index.
    """
    pruned = descriptor_pb2.FileDescriptorSet()
    pruned.CopyFrom(fds)
    message = _find(pruned, message_name)
    if message is None:
        raise KeyError(f"message {message_name} is not in the descriptor set")
    wanted = set(keep)
    fields = [f for f in message.field if f.name in wanted]
    used_oneofs = sorted({f.oneof_index for f in fields if f.HasField("oneof_index")})
    new_index = {old: new for new, old in enumerate(used_oneofs)}
    oneofs = [message.oneof_decl[i] for i in used_oneofs]
    for f in fields:
        if f.HasField("oneof_index"):
            f.oneof_index = new_index[f.oneof_index]
    kept_fields = [_copy(f, descriptor_pb2.FieldDescriptorProto) for f in fields]  # before the originals go
    kept_oneofs = [_copy(o, descriptor_pb2.OneofDescriptorProto) for o in oneofs]
    del message.field[:]
    message.field.extend(kept_fields)
    del message.oneof_decl[:]
    message.oneof_decl.extend(kept_oneofs)
    return pruned


def _copy(message, kind):  # noqa: ANN001, ANN202
    copy = kind()
    copy.CopyFrom(message)
    return copy


def _find(fds: descriptor_pb2.FileDescriptorSet, full_name: str) -> descriptor_pb2.DescriptorProto | None:
    for file in fds.file:
        prefix = f"{file.package}." if file.package else ""
        if not full_name.startswith(prefix):
            continue
        found = _find_in(file.message_type, prefix, full_name)
        if found is not None:
            return found
    return None


def _find_in(messages, prefix: str, full_name: str) -> descriptor_pb2.DescriptorProto | None:  # noqa: ANN001
    for message in messages:
        name = prefix + message.name
        if name == full_name:
            return message
        if full_name.startswith(name + "."):
            found = _find_in(message.nested_type, name + ".", full_name)
            if found is not None:
                return found
    return None
