"""Planning one lookup of a post-processor's ``external_source``: its variables checked against the SQL output's
columns, its outputs typed, and one hidden column per ``output_mapping`` entry (``__ext_<source>_<column>``)
computed on the executors with ``mapInArrow`` (:func:`plan_lookup`). Each lookup kind (:mod:`.kinds`) builds its
spec and calls it. Plans on the driver; :func:`_lookup_batches` runs on executors.

One module (~310 lines): planning a lookup and the executor function it plans (``mapInArrow``) belong
together; the executor side must be importable alone on the workers.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dagger.errors import DaggerConfigError
from dagger.plugins.lookup import PREFIX
from dagger.processors.external.base import (
    Metrics,
    convert,
    output_columns,
    parse_variables,
)
from dagger.worker_cache import BuiltCache, content_key

if TYPE_CHECKING:
    from dagger.plugins.processor import ProcessorContext


def typing_message(source: Any, context: ProcessorContext, where: str) -> Any:
    """The message typing a response: the source's ``type``, else the Kafka sink's message (as Dagger); none
    with ``retain_response_type`` and no ``type``: the values keep their own JSON types (VARIANT columns)."""
    name = source.type
    if not name and source.retain_response_type:
        return None
    if not name:
        sink = sink_message(context)
        name = sink.full_name if sink is not None else None
    if not name:
        raise DaggerConfigError(
            f"{where}: no message types the response; set `type` to an output proto, or "
            "retain_response_type: true to keep each value's own JSON type"
        )
    return context.descriptors.find_message(name, f"{where}.type")


def sink_message(context: ProcessorContext) -> Any:
    """The protobuf message of the job's (first) Kafka sink, which types lookup outputs as in Dagger; None."""
    for _, sink in context.config.sink_configs:
        message = sink.settings.output_message()
        if message:
            return context.descriptors.find_message(message, "SINK_KAFKA_PROTO_MESSAGE")
    return None


def path_field(message: Any, path: str) -> Any:
    """The field of ``message`` a plain ``$.a.b`` path selects in the message printed as JSON (proto field names);
    None for a path JSONPath must evaluate, one the message lacks, or one through a repeated or well-known field."""
    from google.protobuf.descriptor import FieldDescriptor

    from dagger.serde.types import DURATION, JSON_TYPES, TIMESTAMP, WRAPPERS  # start-up: loads google, pyspark

    keys = _simple_path(path)
    if keys is None:
        return None
    field = None
    for i, key in enumerate(keys):
        if message is None or key not in message.fields_by_name:
            return None
        field = message.fields_by_name[key]
        opaque = field.message_type is not None and field.message_type.full_name in (
            TIMESTAMP,
            DURATION,
            *JSON_TYPES,
            *WRAPPERS,
        )
        more = i < len(keys) - 1
        if more and (field.type != FieldDescriptor.TYPE_MESSAGE or field.is_repeated or opaque):
            return None
        message = field.message_type if more else None
    return field


def retained_fields(mapping: dict[str, str], context: ProcessorContext, response: Any = None) -> dict[str, Any]:
    """With ``retain_response_type`` and no ``type``: the outputs whose type is known all the same. A gRPC
    response's field at the output's path (its descriptor says it); else the sink message's field of the output's
    name (the type the row is written with). The others stay VARIANT, each value of its own JSON type."""
    if response is not None:
        found = {name: path_field(response, path) for name, path in mapping.items()}
    else:
        sink = sink_message(context)
        found = {name: sink.fields_by_name.get(name) for name in mapping} if sink is not None else {}
    return {name: field for name, field in found.items() if field is not None}


def with_sets(context: ProcessorContext, urls: str, where: str) -> Any:
    """The job's descriptor sets merged with those at the comma-separated ``urls``."""
    from dagger.schema.descriptor_sets import (  # start-up: loads google
        DescriptorSet,
        SchemaRegistryError,
        StencilSettings,
        fetch_bytes,
    )

    settings = StencilSettings.from_config(context.config)
    blobs = [("SCHEMA_REGISTRY_STENCIL_URLS", context.descriptors.serialized)]
    for url in parse_variables(urls):
        try:
            blobs.append((url, fetch_bytes(url, settings)))
        except SchemaRegistryError as exc:
            raise DaggerConfigError(f"{where}: {str(exc).removeprefix('SCHEMA_REGISTRY_STENCIL_URLS: ')}") from None
    try:
        return DescriptorSet(blobs)
    except SchemaRegistryError as exc:
        raise DaggerConfigError(f"{where}: {exc}") from None


def plan_lookup(
    df: Any,
    kind: str,
    source: Any,
    index: int,
    context: ProcessorContext,
    where: str,
    mapping: dict[str, str],
    spec: dict,
    response: Any = None,
) -> tuple[Any, list[tuple[str, str]]]:
    """What every planner ends with: type the outputs, create the metrics (``<KIND>.<metricId or index>``), and
    add one hidden column per output, computed on the executors; returns ``df`` and ``[(output, column)]``.
    ``response``: the message a gRPC answer is (it types retained outputs by their paths)."""
    proto = typing_message(source, context, where)
    known = retained_fields(mapping, context, response) if proto is None and kind != "pg" else {}
    columns = output_columns(mapping, proto, source.retain_response_type, where, known)
    label = f"{kind.upper()}.{source.metricId or index}"
    metrics = Metrics.create(context.spark, label)
    context.lookups[label] = metrics
    spec = {**_common_spec(source, label, columns, proto, context), "kind": kind, **spec}
    if context.mocks is not None:  # dagger test: answered from the case (a mock may name its lookup)
        spec["mocks"] = [m for m in context.mocks if m.get("LOOKUP") in (None, label)]
    hidden = [f"{PREFIX}{kind}{index}_{c.name}" for c in columns]
    from pyspark.sql import functions as F

    df = _map(df, spec, columns, hidden, metrics, _lookup_batches)
    untyped = {h: F.parse_json(h) for h, c in zip(hidden, columns, strict=True) if c.field is None}
    if untyped:  # JSON text from the executors, parsed in the JVM: each value of its own type
        df = df.withColumns(untyped)
    return df, list(zip([c.name for c in columns], hidden, strict=True))


def _common_spec(source: Any, label: str, columns: list, proto: Any, context: ProcessorContext) -> dict[str, Any]:
    """The executor-side settings every lookup kind has (plain data: it is pickled to the executors)."""
    return {
        "name": label,
        "stream_timeout": source.stream_timeout,
        "connect_timeout": source.connect_timeout or source.stream_timeout,
        "capacity": source.capacity,
        "fail_on_errors": source.fail_on_errors,
        "cache_ttl_seconds": source.cache_ttl_seconds,
        "retries": source.retries,
        "retry_backoff_ms": source.retry_backoff_ms,
        "rate_limit_per_second": source.rate_limit_per_second,
        "outputs": [(c.name, c.path) for c in columns],
        # output -> (message, field) typing it, resolved again on the executors (descriptors do not pickle)
        "fields": {c.name: (c.field.containing_type.full_name, c.field.name) for c in columns if c.field is not None},
        "descriptor_set_b64": base64.b64encode(context.descriptors.serialized).decode(),
    }


def variable_columns(df: Any, text: str | None, where: str) -> list[str]:
    """The variables of a ``*_variables`` key; each must be a SQL output column."""
    names = parse_variables(text)
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise DaggerConfigError(
            f"{where}: {', '.join(missing)} not in the SQL output; columns: "
            + ", ".join(c for c in df.columns if not c.startswith(PREFIX))
        )
    return names


def output_paths(output_mapping: dict[str, Any], where: str) -> dict[str, str]:
    """``{column: {path}}`` → ``{column: path}``, every path parsed as JSONPath."""
    from jsonpath_ng.ext import parse

    mapping = {name: out.path for name, out in output_mapping.items()}
    for name, path in mapping.items():
        try:
            parse(path)
        except Exception as exc:  # noqa: BLE001 - jsonpath-ng raises plain Exceptions as well as its own
            raise DaggerConfigError(f"{where}.output_mapping.{name}.path {path!r} is not JSONPath: {exc}") from None
    return mapping


def _map(df: Any, spec: dict, columns: list, hidden: list[str], metrics: Metrics, run: Callable) -> Any:
    from pyspark.sql.types import StructField, StructType

    schema = StructType(
        list(df.schema.fields) + [StructField(h, c.spark_type, True) for h, c in zip(hidden, columns, strict=True)]
    )

    def batches(iterator: Iterator[Any]) -> Iterator[Any]:
        return run(iterator, spec, schema, metrics)

    return df.mapInArrow(batches, schema)


_FIELDS = BuiltCache(64)


def _fields(spec: dict) -> dict[str, Any]:
    """The proto fields typing the outputs, resolved once per worker from the shipped descriptor set."""
    if not spec["fields"]:
        return {}

    def build() -> dict[str, Any]:
        from google.protobuf import descriptor_pb2

        from dagger.schema.descriptor_sets import build_pool  # start-up: loads google

        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["descriptor_set_b64"]))
        pool = build_pool(fds)
        return {
            output: pool.FindMessageTypeByName(message).fields_by_name[name]
            for output, (message, name) in spec["fields"].items()
        }

    return _FIELDS.get(content_key(json.dumps(spec["fields"], sort_keys=True), spec["descriptor_set_b64"]), build)


def _lookup_batches(iterator: Iterator[Any], spec: dict, schema: Any, metrics: Metrics) -> Iterator[Any]:
    """Executor side of every lookup kind: per Arrow batch, the calls, then the typed output columns."""
    import pyarrow as pa
    from jsonpath_ng.ext import parse
    from pyspark.sql.pandas.types import to_arrow_schema

    from dagger.processors.external.base import (
        LookupError_,  # cycle: dagger.processors.external.base import(s) this module
    )

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    fields = _fields(spec)
    kind = spec["kind"]
    if kind == "pg":
        from dagger.processors.external.postgres import (  # cycle: dagger.processors.external.postgres import(s) this module
            PgCaller,
            build_queries,
        )

        make, build, variables = PgCaller, build_queries, spec["query_variables"]
    elif kind == "grpc":
        from dagger.processors.external.grpc import (  # cycle: dagger.processors.external.grpc import(s) this module
            GrpcCaller,
            build_grpc_requests,
        )

        make, build, variables = GrpcCaller, build_grpc_requests, spec["request_variables"]
    else:
        from dagger.processors.external.http import (  # cycle: dagger.processors.external.http import(s) this module
            HttpCaller,
            build_es_requests,
            build_requests,
        )

        make = HttpCaller.shared
        build = build_es_requests if kind == "es" else build_requests
        variables = spec["endpoint_variables"] + spec["request_variables"] + spec["header_variables"]
    if "mocks" in spec:  # dagger test: answered from the case's MOCKS, nothing is called
        from dagger.processors.external.mocks import (
            mock_caller,  # cycle: dagger.processors.external.mocks import(s) this module
        )

        make = mock_caller
    caller = make(spec)
    needed = sorted(set(variables))
    # Postgres outputs name result columns; the others are JSONPath, read without it when simple ($.a.b)
    paths = [
        (name, path, None, None) if kind == "pg" else (name, path, parse(path), _simple_path(path))
        for name, path in spec["outputs"]
    ]
    share = bool(spec["cache_ttl_seconds"])
    try:
        for batch in iterator:
            rows = batch.num_rows
            if share and needed:  # with a cache, each distinct request of the batch is made (or looked up) once
                first, positions = _distinct_rows(batch, needed)
                picked = batch.take(first)
            else:
                first, positions, picked = None, None, batch
            columns = {c: picked.column(c).to_pylist() for c in needed}
            values: list[list[Any]] = [[None] * picked.num_rows for _ in paths]

            unread = [0]  # answers without a mapped path, passed on unenriched (fail_on_errors false)

            def done(row: int, answer: Any, values: list[list[Any]] = values, unread: list[int] = unread) -> None:
                """Type one row's answer into the output columns (as it arrives, while other calls run)."""
                if answer is None or (kind == "pg" and not answer):  # skipped, failed, or no result row
                    return
                found = []
                for name, path, compiled, simple in paths:
                    if compiled is None:  # a Postgres result column
                        if path not in answer:
                            raise LookupError_(
                                f"{spec['name']}: output_mapping.{name} names result column {path!r}, which the "
                                f"query does not return; it returns {', '.join(answer)}"
                            )
                        found.append(answer[path])
                        continue
                    value = _find(answer, simple, compiled)
                    if value is _NOTHING:
                        if spec["fail_on_errors"]:
                            raise LookupError_(
                                f"{spec['name']}: output_mapping.{name} path {path} finds nothing in the response "
                                f"{json.dumps(answer)[:200]} (fail_on_errors is true)"
                            )
                        unread[0] += 1  # the row passes on unenriched, counted
                        return
                    found.append(value)
                for out, value, (name, *_) in zip(values, found, paths, strict=True):
                    out[row] = convert(value, fields.get(name))

            requests = build(spec, columns, picked.num_rows)
            if positions is not None:
                requests = list(requests)
            counts, latencies = caller.call_all(requests, done)
            counts["invalid_response"] += unread[0]
            if positions is not None:
                import pyarrow.compute as pc

                skipped = [i for i, r in enumerate(requests) if r is None]
                empty_rows = pc.sum(pc.is_in(positions, pa.array(skipped, pa.int64()))).as_py() if skipped else 0
                counts["empty_input"] = empty_rows or 0
                counts["cache_hits"] += rows - picked.num_rows - (counts["empty_input"] - len(skipped))
            metrics.add(counts, latencies)
            arrays = list(batch.columns)
            for offset, column_values in enumerate(values):
                target = arrow_schema.field(batch.num_columns + offset).type
                column = pa.array(column_values, type=target)
                arrays.append(column if positions is None else column.take(positions))
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
    finally:
        caller.close()


_NOTHING = object()


def _simple_path(path: str) -> list[str] | None:
    """``$.a.b`` → ``["a", "b"]`` (read with plain dict lookups); None for anything JSONPath must evaluate."""

    if re.fullmatch(r"\$(\.[A-Za-z_][A-Za-z0-9_]*)+", path):
        return path.split(".")[1:]
    return None


def _find(answer: Any, simple: list[str] | None, compiled: Any) -> Any:
    """The first value ``path`` selects in ``answer``, or ``_NOTHING``."""
    if simple is not None:
        value = answer
        for key in simple:
            if not isinstance(value, dict) or key not in value:
                return _NOTHING
            value = value[key]
        return value
    found = compiled.find(answer)
    return found[0].value if found else _NOTHING


def _distinct_rows(batch: Any, columns: list[str]) -> tuple[Any, Any]:
    """Rows of ``batch`` with distinct values in ``columns``: (index of each one's first row, each row's one).

    Arrow only: each column is dictionary-encoded, the codes are combined into one key, and ``index_in`` maps
    rows to distinct keys.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    key = None
    for name in columns:
        column = batch.column(name)
        if not (
            pa.types.is_string(column.type) or pa.types.is_integer(column.type) or pa.types.is_large_string(column.type)
        ):
            column = pc.cast(column, pa.string()) if not pa.types.is_nested(column.type) else None
        if column is None:  # structs and lists: no sharing for this batch
            everything = pa.array(range(batch.num_rows), pa.int64())
            return everything, everything
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        codes = pc.cast(encoded.indices, pa.int64())
        size = len(encoded.dictionary) + 1
        key = codes if key is None else pc.add(pc.multiply(key, size), codes)
    distinct = pc.unique(key)
    return pc.cast(pc.index_in(distinct, key), pa.int64()), pc.cast(pc.index_in(key, distinct), pa.int64())
