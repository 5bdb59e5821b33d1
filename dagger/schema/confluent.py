"""Schemas from a registry that speaks Confluent's REST API (``SCHEMA_REGISTRY_CONFLUENT_*``), through
``confluent_kafka.schema_registry.SchemaRegistryClient``.

A stream with ``INPUT_SCHEMA_WIRE_FORMAT=confluent`` reads its subject (``INPUT_SCHEMA_SUBJECT``, by default
``<topic>-value``) when the job starts: the latest version is the *reader* schema (the table's columns), and every
version registered then is a *writer* schema its records may name by id. :func:`fetch_subject` returns them as a
:class:`SubjectSchemas`, which travels as one JSON blob among the job's descriptor sets
(:class:`~dagger.schema.descriptor_sets.DescriptorSet`), so that it is pinned under the checkpoint with them and a
restart while the registry is down goes on with the kept copy. References are followed: an Avro schema is made
self-contained (named types of other subjects inlined where first used, as Spark's Avro reader needs them), a
protobuf schema comes as ``FileDescriptorProto`` (``?format=serialized``) with the files it imports.

Runs on the driver, and on executors for a schema id the job did not know when it started (:func:`schema_by_id`,
cached per process: an id's schema never changes).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dagger.errors import DaggerConfigError, DescriptorFetchError

log = logging.getLogger("dagger")

#: the blob source prefix naming a subject among the descriptor sets (``confluent:<subject>``)
BLOB_PREFIX = "confluent:"

#: HTTP statuses the client retries (as confluent-kafka does); anything else is an answer
_RETRIED = {408, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class ConfluentSettings:
    """Where the registry is and how to sign in (``SCHEMA_REGISTRY_CONFLUENT_*``)."""

    url: str
    user_info: str | None = None
    bearer_token: str | None = None
    logical_cluster: str = ""
    timeout_ms: int = 10000
    retries: int = 3

    @classmethod
    def from_config(cls, config: Any) -> ConfluentSettings:  # a JobConfig
        if not config.SCHEMA_REGISTRY_CONFLUENT_URL:
            raise DaggerConfigError(
                "SCHEMA_REGISTRY_CONFLUENT_URL is not set: a stream or sink with wire format 'confluent' needs the "
                "registry's URL (comma-separated URLs of a Confluent-compatible Schema Registry)"
            )
        return cls(
            url=config.SCHEMA_REGISTRY_CONFLUENT_URL,
            user_info=config.SCHEMA_REGISTRY_CONFLUENT_BASIC_AUTH_USER_INFO,
            bearer_token=config.SCHEMA_REGISTRY_CONFLUENT_BEARER_TOKEN,
            logical_cluster=config.SCHEMA_REGISTRY_CONFLUENT_BEARER_LOGICAL_CLUSTER,
            timeout_ms=config.SCHEMA_REGISTRY_CONFLUENT_TIMEOUT_MS,
            retries=config.SCHEMA_REGISTRY_CONFLUENT_RETRIES,
        )

    @property
    def shown(self) -> str:
        """The URLs without any ``user:password@`` in them, for messages and logs."""
        shown = []
        for url in self.url.split(","):
            parts = urlsplit(url.strip())
            netloc = parts.netloc.rpartition("@")[2]
            shown.append(urlunsplit(parts._replace(netloc=netloc)))
        return ",".join(shown)

    def client_conf(self) -> dict[str, Any]:
        """The ``SchemaRegistryClient`` settings."""
        conf: dict[str, Any] = {
            "url": self.url,
            "timeout": max(self.timeout_ms // 1000, 1),
            "max.retries": self.retries,
            "retries.wait.ms": 200,
            "retries.max.wait.ms": 2000,
        }
        if self.user_info:
            conf["basic.auth.user.info"] = self.user_info
        if self.bearer_token:
            conf["bearer.auth.credentials.source"] = "STATIC_TOKEN"
            conf["bearer.auth.token"] = self.bearer_token
            conf["bearer.auth.logical.cluster"] = self.logical_cluster
        return conf


_CLIENTS: dict[ConfluentSettings, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def client(settings: ConfluentSettings) -> Any:
    """One ``SchemaRegistryClient`` per settings per process (it caches schemas by id)."""
    with _CLIENTS_LOCK:
        if settings not in _CLIENTS:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            try:
                _CLIENTS[settings] = SchemaRegistryClient(settings.client_conf())
            except (ValueError, TypeError) as exc:
                raise DaggerConfigError(f"SCHEMA_REGISTRY_CONFLUENT_*: {exc}") from None
        return _CLIENTS[settings]


@dataclass
class SubjectSchemas:
    """A subject as a job reads it: its latest version (the reader schema) and every version's schema by id.

    ``schemas`` maps a schema id to ``{"schema": text, "references": {name: text}}``; for PROTOBUF the texts are
    base64 ``FileDescriptorProto`` s and ``references`` maps each imported file's name to its own.
    """

    subject: str
    schema_type: str  # AVRO, PROTOBUF or JSON
    reader_id: int
    version: int
    schemas: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def reader(self) -> dict[str, Any]:
        return self.schemas[self.reader_id]

    def to_blob(self) -> tuple[str, bytes]:
        return BLOB_PREFIX + self.subject, json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_blob(cls, data: bytes) -> SubjectSchemas:
        fields = json.loads(data)
        fields["schemas"] = {int(k): v for k, v in fields["schemas"].items()}
        return cls(**fields)

    def avro_schema(self, schema_id: int | None = None) -> str:
        """A version's Avro schema, self-contained (referenced named types inlined), as JSON text."""
        return self_contained_avro(self.schemas[self.reader_id if schema_id is None else schema_id])

    def file_descriptors(self, schema_id: int | None = None) -> list[bytes]:
        """A PROTOBUF version's serialized ``FileDescriptorProto`` s: its imports first, then its own file."""
        entry = self.schemas[self.reader_id if schema_id is None else schema_id]
        return [base64.b64decode(t) for t in entry["references"].values()] + [base64.b64decode(entry["schema"])]


def self_contained_avro(entry: dict[str, Any]) -> str:
    """An Avro schema with the named types of its references written out where first used."""
    if not entry["references"]:
        return entry["schema"]
    import avro.schema

    names = avro.schema.Names()
    for text in entry["references"].values():
        avro.schema.make_avsc_object(json.loads(text), names)
    return json.dumps(avro.schema.make_avsc_object(json.loads(entry["schema"]), names).to_json())


def fetch_subject(settings: ConfluentSettings, subject: str, where: str) -> SubjectSchemas:
    """The subject's latest version and every registered version's schema; ``where`` names the config key that
    chose the subject, for the errors."""
    registry = client(settings)
    with _answers(settings, f"{where}: subject {subject!r}"):
        latest = registry.get_latest_version(subject)
        schema_type = latest.schema.schema_type or "AVRO"
        fmt = "serialized" if schema_type == "PROTOBUF" else None
        if fmt:
            latest = registry.get_latest_version(subject, fmt=fmt)
        schemas: dict[int, dict[str, Any]] = {}
        for version in registry.get_versions(subject):
            registered = registry.get_version(subject, version, fmt=fmt)
            schemas[registered.schema_id] = _entry(registry, registered.schema, fmt)
        schemas[latest.schema_id] = _entry(registry, latest.schema, fmt)
    log.info(
        "%s: subject %r version %d (schema id %d, %s) from the registry at %s; %d version(s) known",
        where,
        subject,
        latest.version,
        latest.schema_id,
        schema_type,
        settings.shown,
        len(schemas),
    )
    return SubjectSchemas(subject, schema_type, latest.schema_id, latest.version, schemas)


def register(settings: ConfluentSettings, subject: str, schema: str, schema_type: str, references: Any = ()) -> int:
    """Register ``schema`` under ``subject`` (the same schema again keeps its id); its id. ``references`` are
    ``SchemaReference`` s. A schema the subject's compatibility refuses is a config error naming the subject."""
    from confluent_kafka.schema_registry import Schema

    with _answers(settings, f"registering a schema under subject {subject!r}"):
        schema_id = client(settings).register_schema(subject, Schema(schema, schema_type, list(references)))
    log.info("subject %r: schema id %d registered at %s", subject, schema_id, settings.shown)
    return schema_id


_BY_ID: dict[tuple[ConfluentSettings, int], dict[str, Any]] = {}


def register_proto(settings: Any, subject: str, descriptor: Any) -> int:
    """Register the file of ``descriptor`` (a message) under ``subject``, each imported file first under its own
    name as confluent-kafka's serializer does (the well-known types are every client's own); the file's id."""
    from confluent_kafka.schema_registry import SchemaReference

    def references(file: Any) -> list[Any]:
        out = []
        for dependency in file.dependencies:
            if dependency.name.startswith("google/protobuf/"):
                continue
            register(settings, dependency.name, _b64(dependency), "PROTOBUF", references(dependency))
            version = client(settings).get_latest_version(dependency.name).version
            out.append(SchemaReference(dependency.name, dependency.name, version))
        return out

    return register(settings, subject, _b64(descriptor.file), "PROTOBUF", references(descriptor.file))


def _b64(file: Any) -> str:
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return base64.b64encode(proto.SerializeToString()).decode()


def schema_by_id(settings: ConfluentSettings, schema_id: int, schema_type: str) -> dict[str, Any]:
    """A schema by its global id (``{"schema", "references", "subjects"}``), fetched once per process.

    Raises :class:`LookupError` when the registry has no such id, :class:`DescriptorFetchError` when it cannot
    be asked (after the client's retries)."""
    key = (settings, schema_id)
    if key not in _BY_ID:
        registry = client(settings)
        fmt = "serialized" if schema_type == "PROTOBUF" else None
        with _answers(settings, f"schema id {schema_id}"):
            schema = registry.get_schema(schema_id, fmt=fmt)
            entry = _entry(registry, schema, fmt)
            entry["subjects"] = sorted(registry.get_subjects_by_schema_id(schema_id))
        _BY_ID[key] = entry
    return _BY_ID[key]


def _entry(registry: Any, schema: Any, fmt: str | None) -> dict[str, Any]:
    """A schema with its references' texts, followed recursively (name → text, dependencies first)."""
    references: dict[str, str] = {}

    def follow(refs: list[Any]) -> None:
        for ref in refs or []:
            if ref.name in references:
                continue
            registered = registry.get_version(ref.subject, ref.version, fmt=fmt)
            follow(registered.schema.references)
            references[ref.name] = registered.schema.schema_str

    follow(schema.references)
    return {"schema": schema.schema_str, "references": references}


class _answers:
    """Turn the client's failures into errors that say what to check: wrong credentials and unknown subjects are
    config errors (exit 2); an unreachable registry is a :class:`DescriptorFetchError` (a restart goes on with the
    checkpoint's copy); an unknown id is a :class:`LookupError`."""

    def __init__(self, settings: ConfluentSettings, what: str):
        self.settings = settings
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None:
            return False
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        at = f"the schema registry at {self.settings.shown}"
        if isinstance(exc, ClientError):
            status, code, message = exc.http_status_code, exc.error_code, exc.error_message
            if status in (401, 403):
                key = (
                    "SCHEMA_REGISTRY_CONFLUENT_BEARER_TOKEN"
                    if self.settings.bearer_token
                    else "SCHEMA_REGISTRY_CONFLUENT_BASIC_AUTH_USER_INFO"
                )
                given = "were refused" if self.settings.user_info or self.settings.bearer_token else "are required"
                raise DaggerConfigError(
                    f"{self.what}: credentials {given} by {at} (HTTP {status}: {message}); check {key}"
                ) from None
            if status == 409 or code in (409, 42201):
                raise DaggerConfigError(f"{self.what}: {at} refused it ({message})") from None
            if code in (40401, 40402):
                raise DaggerConfigError(
                    f"{self.what} is not in {at} ({message}); register it, or name the subject the records use "
                    "(INPUT_SCHEMA_SUBJECT, SINK_KAFKA_SCHEMA_SUBJECT; by default <topic>-value; a sink may register "
                    "its own with SINK_KAFKA_SCHEMA_AUTO_REGISTER=true)"
                ) from None
            if code == 40403 or status == 404:
                raise LookupError(f"{self.what} is not in {at} ({message})") from None
            if status in _RETRIED or status < 0:
                raise DescriptorFetchError(f"{self.what}: {at} did not answer: HTTP {status}: {message}") from None
            raise DaggerConfigError(f"{self.what}: {at} answered HTTP {status} ({code}): {message}") from None
        if isinstance(exc, OSError) or type(exc).__module__.startswith(("httpx", "httpcore")):
            raise DescriptorFetchError(f"{self.what}: {at} cannot be reached: {exc}") from None
        return False
