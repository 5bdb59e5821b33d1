"""Functions over arrays of serialized protobuf messages (Dagger's Longbow+ ``proto_data``): Filters, CondEq,
SelectFields. Messages are decoded with the job's own descriptors (``SCHEMA_REGISTRY_STENCIL_URLS``)."""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from udfs.declare import Example, UdfContext, arrow_function, literal, macro, macro_args, rows

_EXAMPLE = (
    "SELECT array(unhex('0A0161'), unhex('0A0162'), unhex('0A0161')) AS msgs"  # three messages: order_number a, b, a
)


@lru_cache(maxsize=8)
def _message_class(descriptor_set: bytes, name: str):  # noqa: ANN202
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
    pool = descriptor_pool.DescriptorPool()
    pending = list(files.file)
    while pending:  # add files after their dependencies
        progressed = False
        for proto in list(pending):
            try:
                pool.Add(proto)
            except TypeError:
                continue
            pending.remove(proto)
            progressed = True
        if not progressed:
            for proto in pending:
                pool.Add(proto)
            break
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    except KeyError:
        raise ValueError(f"proto message {name!r} is not in the job's descriptors") from None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _field(message, path: str):  # noqa: ANN001, ANN202
    from google.protobuf import json_format
    from google.protobuf.message import Message

    value = message
    for part in path.split("."):
        descriptor = value.DESCRIPTOR.fields_by_name.get(part)
        if descriptor is None:
            raise ValueError(f"field {part!r} of {path!r} is not in {value.DESCRIPTOR.full_name}")
        value = getattr(value, part)
        if descriptor.enum_type is not None and not isinstance(value, (list, tuple)):
            value = (
                descriptor.enum_type.values_by_number.get(value).name
                if value in descriptor.enum_type.values_by_number
                else value
            )
    if isinstance(value, Message):
        return json_format.MessageToJson(value, indent=None, preserving_proto_field_name=True)
    return _text(value)


@macro(
    "CondEq",
    "CondEq(field STRING, value STRING|INT|BOOLEAN) -> predicate",
    notes="A predicate is a STRUCT<field, value> compared on the field's text form (Dagger compared Java objects).",
)
def cond_eq(args: list) -> str:
    """An equality predicate for Filters: the message field (dotted path) equals ``value``."""
    field, value = macro_args("CondEq", args, 2)
    return f"named_struct('field', {field}, 'value', CAST({value} AS STRING))"


@arrow_function(
    "__Filters",
    "messages ARRAY<BINARY>, proto STRING, predicates ARRAY<STRUCT<field: STRING, value: STRING>>",
    "ARRAY<BINARY>",
    context=True,
)
def filters_worker(context: UdfContext):  # noqa: ANN201
    """Filters' worker: decode each message with the job's descriptors and keep those matching every predicate."""

    def run(messages: pa.Array, proto: pa.Array, predicates: pa.Array) -> pa.Array:
        out = []
        for raw, name, preds in rows(messages, proto, predicates):
            if raw is None:
                out.append(None)
                continue
            cls = _message_class(context.descriptor_set, name)
            kept = []
            for data in raw:
                message = cls.FromString(data)
                if all(_field(message, p["field"]) == p["value"] for p in preds or []):
                    kept.append(data)
            out.append(kept)
        return pa.array(out, pa.list_(pa.binary()))

    return run


@macro(
    "Filters",
    "Filters(messages ARRAY<BINARY>, proto STRING, predicate[, predicate ...]) -> ARRAY<BINARY>",
    python=True,
    examples=[
        Example(
            "SELECT size(Filters(msgs, 'dagger.examples.BookingLogMessage', CondEq('order_number', 'a'))) FROM t",
            [(2,)],
            _EXAMPLE,
        )
    ],
    notes="Returns the matching messages still serialized (ARRAY<BINARY>) so that SelectFields, or a sink, can "
    "use them; Dagger returned Java message objects.",
)
def filters(args: list) -> str:
    """The messages (serialized ``proto``) for which every CondEq predicate holds."""
    if len(args) < 3:
        raise ValueError(f"Filters takes (messages, proto, predicate, ...), got {len(args)} argument(s)")
    messages, proto, *predicates = [a.sql(dialect="spark") for a in args]
    literal("Filters", args[1], "the proto message name")
    return f"__Filters({messages}, {proto}, array({', '.join(predicates)}))"


@arrow_function(
    "__SelectFields",
    "messages ARRAY<BINARY>, proto STRING, path STRING",
    "ARRAY<STRING>",
    context=True,
)
def select_fields_worker(context: UdfContext):  # noqa: ANN201
    """SelectFields' worker: one (nested) field of every message, as text."""

    def run(messages: pa.Array, proto: pa.Array, path: pa.Array) -> pa.Array:
        out = []
        for raw, name, field in rows(messages, proto, path):
            if raw is None:
                out.append(None)
                continue
            cls = _message_class(context.descriptor_set, name)
            out.append([_field(cls.FromString(data), field) for data in raw])
        return pa.array(out, pa.list_(pa.string()))

    return run


@macro(
    "SelectFields",
    "SelectFields(messages ARRAY<BINARY>, proto STRING, path STRING) or SelectFields(Filters(...), path) "
    "-> ARRAY<STRING>",
    python=True,
    examples=[
        Example(
            "SELECT SelectFields(msgs, 'dagger.examples.BookingLogMessage', 'order_number') FROM t",
            [(["a", "b", "a"],)],
            _EXAMPLE,
        ),
        Example(
            "SELECT SelectFields(Filters(msgs, 'dagger.examples.BookingLogMessage', CondEq('order_number', 'b')), "
            "'order_number') FROM t",
            [(["b"],)],
            _EXAMPLE,
        ),
    ],
    notes="Values come back as text (numbers in decimal, booleans true/false, enums by name, messages as JSON); "
    "cast them in SQL where a number is needed.",
)
def select_fields(args: list) -> str:
    """One (dotted, nested) field of every message."""
    from sqlglot import exp

    if len(args) == 2:
        inner = args[0]
        if not (isinstance(inner, exp.Anonymous) and str(inner.this).upper() in ("FILTERS", "__FILTERS")):
            raise ValueError("SelectFields with two arguments takes the result of Filters(...) and a field path")
        proto = inner.expressions[1].sql(dialect="spark")
        return f"__SelectFields({inner.sql(dialect='spark')}, {proto}, {args[1].sql(dialect='spark')})"
    messages, proto, path = macro_args("SelectFields", args, 3)
    return f"__SelectFields({messages}, {proto}, {path})"
