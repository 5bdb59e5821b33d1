"""The descriptor sets a job runs with: fetched at start (or the checkpoint's copy when their server is down),
checked against every stream and sink, refreshed while a live job runs, and compared with the running query's
before a switch. Runs on the driver.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dagger.errors import DescriptorFetchError
from dagger.formats.records import stream_subject
from dagger.formats.table import stream_table
from dagger.plugins.format import format_of
from dagger.schema.compat import check_and_record, incompatibilities, keep_copy, kept_copy, snapshot
from dagger.schema.confluent import ConfluentSettings, fetch_subject
from dagger.schema.descriptor_sets import DescriptorSet, SchemaRegistry, StencilSettings

if TYPE_CHECKING:
    from dagger.job.context import JobContext
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger("dagger")


def current(ctx: JobContext) -> DescriptorSet:
    """The descriptor sets in use: fetched on first use; the checkpoint's copy when the fetch fails at a restart."""
    if ctx.descriptor_set is None:
        settings = StencilSettings.from_config(ctx.config)
        settings.deadline_s = ctx.config.SPARK_FIRST_CONTACT_TIMEOUT_MS / 1000  # at start: fail fast
        try:
            ctx.descriptor_set = _with_subjects(ctx, SchemaRegistry(settings).get())
        except DescriptorFetchError as exc:
            ctx.descriptor_set = _kept(ctx, exc)
    return ctx.descriptor_set


def _with_subjects(ctx: JobContext, fetched: DescriptorSet) -> DescriptorSet:
    """``fetched`` (the Stencil sets) with the registry subjects the job reads and writes, fetched now."""

    subjects = _subjects(ctx)
    return DescriptorSet(fetched.blobs + subjects, absent=fetched.absent) if subjects else fetched


def _subjects(ctx: JobContext) -> list[tuple[str, bytes]]:
    """The Confluent Schema Registry subjects the streams read (``INPUT_SCHEMA_WIRE_FORMAT=confluent``), as
    blobs among the descriptor sets."""

    wanted = {}
    for stream in ctx.config.STREAMS:
        subject = stream_subject(stream)
        if subject is not None:
            wanted.setdefault(subject[0], subject[1])
    for _, entry in ctx.config.sink_configs:  # sinks that look their schemas up (auto-register ones make them)
        for subject, where in entry.settings.registry_subjects():
            wanted.setdefault(subject, where)
    if not wanted:
        return []
    settings = ConfluentSettings.from_config(ctx.config)
    return [fetch_subject(settings, subject, where).to_blob() for subject, where in wanted.items()]


def refresh_seconds(ctx: JobContext) -> float | None:
    """How often a running job fetches its descriptor sets again (``SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH``
    with ``SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS``); None: never (off, or a bounded run)."""
    if ctx.bounded or not ctx.config.SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH:
        return None
    return max(ctx.config.SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS / 1000, 1.0)


def fetch_fresh(ctx: JobContext) -> DescriptorSet | None:
    """The descriptor sets fetched again, when they differ from the ones the job runs with (None when they do not,
    or cannot be fetched: the job goes on with what it has, as Dagger's Stencil cache does)."""

    try:
        fresh = _with_subjects(ctx, SchemaRegistry(StencilSettings.from_config(ctx.config)).get())
    except DescriptorFetchError as exc:
        log.warning("descriptor refresh failed, going on with the sets the job runs with: %s", exc)
        return None
    return fresh if fresh.sha256 != current(ctx).sha256 else None


def changes(ctx: JobContext, fresh: DescriptorSet, rewritten_sql: str | None) -> tuple[list[str], list[str]]:
    """``(problems, added)`` of switching the running query to ``fresh``: fields the query (``rewritten_sql``) uses
    that were removed or retyped (as the restart check names them), and the columns ``fresh`` adds."""
    from dagger.sql.rewrite import referenced_columns  # start-up: loads sqlglot

    rowtime = ctx.config.FLINK_ROWTIME_ATTRIBUTE_NAME
    streams = [s for s in ctx.config.STREAMS if format_of(s).from_descriptor_sets or stream_subject(s) is not None]
    running = current(ctx)
    before = snapshot(running.sha256, {s.INPUT_SCHEMA_TABLE: stream_table(s, running, rowtime) for s in streams})
    try:
        after = snapshot(fresh.sha256, {s.INPUT_SCHEMA_TABLE: stream_table(s, fresh, rowtime) for s in streams})
    except Exception as exc:  # noqa: BLE001 - a message gone from the new sets: name it
        return [f"the new descriptor sets cannot describe the streams: {exc}"], []
    used = referenced_columns(rewritten_sql) if rewritten_sql is not None else None
    problems = incompatibilities(before, after, used)
    added = [
        f"{table}.{name}"
        for table, columns in after["tables"].items()
        for name in columns
        if name not in before["tables"].get(table, {})
    ]
    return problems, added


def check(ctx: JobContext) -> None:
    """Resolve every stream's records (message or JSON Schema) and rowtime field before Spark starts (config
    errors → exit 2)."""

    for stream in ctx.config.STREAMS:
        format_of(stream).check(stream, current(ctx))


def pin(ctx: JobContext, tables: dict, rewritten_sql: str) -> None:
    """Check the descriptor sets against the ones the checkpoint recorded (a restart must read its state) and keep
    a copy of them under the checkpoint (for a restart while their server is down)."""
    from dagger.sql.rewrite import referenced_columns  # start-up: loads sqlglot

    descriptors = current(ctx)
    check_and_record(ctx.store, snapshot(descriptors.sha256, tables), referenced_columns(rewritten_sql))
    keep_copy(ctx.store, descriptors.sha256, descriptors.blobs)


def _kept(ctx: JobContext, failure: DescriptorFetchError) -> DescriptorSet:
    """The descriptor sets the checkpoint keeps, when their server is down at a restart; else ``failure``."""

    try:
        kept = kept_copy(ctx.store)
    except Exception:  # noqa: BLE001 - no readable copy: the fetch failure is what the user must see
        kept = None
    if kept is None:
        raise failure
    sha256, blobs = kept
    log.warning(
        "%s; going on with the copy of the descriptor sets this job's checkpoint keeps (sha256 %s, from %s)",
        str(failure).split(". Check")[0],
        sha256[:12],
        ", ".join(source for source, _ in blobs),
    )
    return DescriptorSet(blobs)
