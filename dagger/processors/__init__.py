"""Pre- and post-processors (``PROCESSOR_PREPROCESSOR_*``, ``PROCESSOR_POSTPROCESSOR_*``), Dagger's model on
DataFrames.

* **Pre-processors** run per input table, after the source and its watermark, before the SQL: the
  ``transformers`` of the ``table_transformers`` entry whose ``table_name`` is the stream's
  ``INPUT_SCHEMA_TABLE``, in order.
* **Post-processors** run on the SQL output, in Dagger's fixed order: external sources (http, es, pg, grpc),
  then internal sources, then transformers. As in Dagger, **only the output columns survive**: the output
  mapping keys of external sources and the ``output_field`` of internal sources, where ``"*"`` of an internal
  ``sql`` source stands for every SQL column (after the named ones). A config with transformers and no source
  would produce empty rows in Dagger; here it is a config error.

Internal sources (:func:`internal_column`): ``sql`` (a column; ``*`` → ``*`` every column; ``*`` → one field
nests the whole row), ``constant`` (a string), ``function`` (``CURRENT_TIMESTAMP``; ``JSON_PAYLOAD`` with
``internal_processor_config.schema_proto_class``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dagger.errors import DaggerConfigError
from dagger.plugins.processor import ProcessorContext, ProcessorEnv
from dagger.plugins.transformer import resolve_transformer
from dagger.session.pandas_free import lit

if TYPE_CHECKING:
    from dagger.config.model import JobConfig

PRE = "PROCESSOR_PREPROCESSOR_CONFIG"
POST = "PROCESSOR_POSTPROCESSOR_CONFIG"
INVALID_RECORD_FILTER = "InvalidRecordFilterTransformer"


def table_transformers(config: JobConfig, table: str) -> list[Any]:
    """The pre-processor transformer configs of ``table`` (empty when pre-processors are off)."""
    if not config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_PREPROCESSOR_CONFIG is None:
        return []
    return [
        t
        for entry in config.PROCESSOR_PREPROCESSOR_CONFIG.table_transformers
        if entry.table_name == table
        for t in entry.transformers
    ]


def filters_invalid_records(config: JobConfig, table: str) -> bool:
    """Whether ``table`` has Dagger's InvalidRecordFilterTransformer among its pre-processors."""
    return any(
        t.transformation_class.rsplit(".", 1)[-1] == INVALID_RECORD_FILTER for t in table_transformers(config, table)
    )


def check_preprocessor_tables(config: JobConfig) -> None:
    """Every ``table_name`` must be a stream's ``INPUT_SCHEMA_TABLE``."""
    if not config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_PREPROCESSOR_CONFIG is None:
        return
    tables = [s.INPUT_SCHEMA_TABLE for s in config.STREAMS]
    for i, entry in enumerate(config.PROCESSOR_PREPROCESSOR_CONFIG.table_transformers):
        if entry.table_name not in tables:
            raise DaggerConfigError(
                f"{PRE}.table_transformers[{i}].table_name {entry.table_name!r} is not a stream; streams: "
                + ", ".join(tables)
            )


def preprocess(df: Any, table: str, context: ProcessorContext) -> Any:
    """Apply ``table``'s pre-processor transformers to its stream."""
    config = context.config
    if not config.PROCESSOR_PREPROCESSOR_ENABLE or config.PROCESSOR_PREPROCESSOR_CONFIG is None:
        return df
    for i, entry in enumerate(config.PROCESSOR_PREPROCESSOR_CONFIG.table_transformers):
        if entry.table_name != table:
            continue
        for j, spec in enumerate(entry.transformers):
            where = f"{PRE}.table_transformers[{i}].transformers[{j}]"
            df = _run_transformer(df, spec, context, where)
    return df


def postprocess(df: Any, context: ProcessorContext) -> Any:
    """External sources, internal sources, the output-row model, then transformers."""
    config = context.config
    if not config.PROCESSOR_POSTPROCESSOR_ENABLE or config.PROCESSOR_POSTPROCESSOR_CONFIG is None:
        return df
    post = config.PROCESSOR_POSTPROCESSOR_CONFIG
    from dagger.processors.external import enrich  # cycle: dagger.processors.external import(s) this module

    df, external = enrich(df, post, context)
    if not post.internal_source and not external:
        raise DaggerConfigError(
            f"{POST}: transformers without an internal or external source would produce empty rows (Dagger keeps "
            'only output columns); add "internal_source": [{"output_field": "*", "type": "sql", "value": "*"}] '
            "to pass the SQL columns on"
        )
    df = df.select(*output_columns(df, post.internal_source, context, external))
    for i, spec in enumerate(post.transformers):
        df = _run_transformer(df, spec, context, f"{POST}.transformers[{i}]")
    return df


def output_columns(
    df: Any, sources: list[Any], context: ProcessorContext, external: list[tuple[str, str]] = ()
) -> list[Any]:
    """The output row: external outputs, each internal source's column, then ``*`` → every other SQL column."""
    from pyspark.sql import functions as F

    from dagger.processors.external import PREFIX  # cycle: dagger.processors.external import(s) this module

    sql_columns = [c for c in df.columns if not c.startswith(PREFIX)]
    sql = df.select(*[_quote(c) for c in sql_columns])
    named = [(name, F.col(_quote(hidden))) for name, hidden in external]
    star = False
    for i, source in enumerate(sources):
        where = f"{POST}.internal_source[{i}]"
        if source.type == "sql" and source.value == "*" and source.output_field == "*":
            star = True
            continue
        named.append((source.output_field, internal_column(sql, source, context, where)))
    names = [n for n, _ in named]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise DaggerConfigError(f"{POST}: output column(s) repeated: {', '.join(duplicated)}")
    columns = [column.alias(name) for name, column in named]
    if star:
        columns += [F.col(_quote(c)) for c in sql_columns if c not in names]
    return columns


def internal_column(df: Any, source: Any, context: ProcessorContext, where: str) -> Any:
    """The value of one internal source as a column expression."""
    from pyspark.sql import functions as F

    if source.type == "sql":
        if source.value == "*":
            return F.struct(*[F.col(_quote(c)) for c in df.columns])
        if source.value not in df.columns:
            raise DaggerConfigError(
                f"{where}: value {source.value!r} is not a column of the SQL output; columns: {', '.join(df.columns)}"
            )
        return F.col(_quote(source.value))
    if source.type == "constant":
        return lit(source.value)
    if source.value == "CURRENT_TIMESTAMP":
        return F.current_timestamp()
    if source.value == "JSON_PAYLOAD":
        proto = (source.internal_processor_config or {}).get("schema_proto_class")
        if not proto:
            raise DaggerConfigError(
                f"{where}: function JSON_PAYLOAD needs internal_processor_config.schema_proto_class (the message "
                "whose fields are serialized)"
            )
        descriptor = context.descriptors.find_message(proto, f"{where}.internal_processor_config.schema_proto_class")
        missing = [f.name for f in descriptor.fields if f.name not in df.columns]
        if missing:
            raise DaggerConfigError(
                f"{where}: JSON_PAYLOAD serializes the SQL row as {proto}, but the SQL output lacks its field(s) "
                + ", ".join(missing)
            )
        return F.to_json(F.struct(*[F.col(_quote(f.name)) for f in descriptor.fields]))
    raise DaggerConfigError(
        f"{where}: function {source.value!r} is not available; accepted: CURRENT_TIMESTAMP, JSON_PAYLOAD"
    )


def _run_transformer(df: Any, spec: Any, context: ProcessorContext, where: str) -> Any:
    """Resolve ``spec``'s transformer (at plan time: a ``PYTHON_FILES`` module may register it), validate its
    ``transformation_arguments`` by its model, build it and apply it."""

    import dagger.processors.transformers  # noqa: F401 - registers Dagger's transformers (their modules load pyspark)

    plugin = resolve_transformer(spec.transformation_class, f"{where}.transformation_class")
    name = plugin.name.rsplit(":", 1)[-1]
    try:
        settings = plugin.settings.model_validate(spec.transformation_arguments)
    except ValidationError as exc:
        given = ", ".join(sorted(spec.transformation_arguments)) or "none"
        problems = []
        for error in exc.errors(include_url=False):
            key = ".".join(map(str, error["loc"]))
            if error["type"] == "missing":
                problems.append(f"{name} needs transformation_arguments.{key}; given: {given}")
                continue
            field = plugin.settings.model_fields.get(str(error["loc"][0]))
            kind = getattr(field.annotation, "__name__", str(field.annotation)) if field else error["msg"]
            value = error["input"]
            problems.append(f"{name} argument {key} must be {kind}, got {type(value).__name__} {value!r}")
        raise DaggerConfigError(f"{where}: " + f"\n  - {where}: ".join(problems)) from None
    transformer = plugin.build(settings, ProcessorEnv(context, where, tuple(df.columns)))
    return transformer.transform(df)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
