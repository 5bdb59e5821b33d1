"""One module (about 490 lines, over the 300 aimed at: three schema types, each with its validation and
compatibility check, ``.proto`` compilation for PROTOBUF text, the REST routes and the test knobs, kept together
so that one file says what the registry does) for an in-memory Confluent-compatible Schema Registry on a free
loopback port, for the tests and the quickstart.

It answers as Confluent's registry does (content type ``application/vnd.schemaregistry.v1+json``, error bodies
``{"error_code": N, "message": ...}``):

* ``GET /schemas/ids/{id}`` (``?format=serialized`` gives a PROTOBUF schema as a base64 ``FileDescriptorProto``;
  other parameters are ignored; ``schemaType`` is left out for AVRO), ``/schemas/ids/{id}/versions``,
  ``/schemas/ids/{id}/subjects``, ``/schemas/guids/{guid}``, ``/schemas/types``;
* ``GET /subjects``, ``/subjects/{s}/versions``, ``/subjects/{s}/versions/{n|latest|-1}`` (+ ``format=serialized``);
  ``POST /subjects/{s}/versions`` registers (the same schema again returns its id; the same schema under another
  subject gets the same global id), ``POST /subjects/{s}`` looks a schema up;
* ``GET``/``PUT /config`` and ``/config/{s}`` (``compatibility`` or ``compatibilityLevel``; a subject without its own
  level is 40408 unless ``?defaultToGlobal=true``), ``POST /compatibility/subjects/{s}/versions[/{v}]``;
* anything else, such as the ``/associations/...`` that confluent-kafka 2.16's default subject strategy asks
  first, is a 404 with an error body. Nothing is ever deleted.

Errors: 40401 subject, 40402 version, 40403 schema not found, 42201 invalid schema (or reference), 42202 invalid
version, 42203 invalid compatibility level, 409 incompatible, 401 wrong or missing credentials (``user_info``
for Basic auth and/or ``token`` for Bearer), 404 unknown route.

Schemas: AVRO is parsed with the ``avro`` package (references are parsed first, into the same names) and checked
with its ``ReaderWriterCompatibilityChecker``, as Confluent's own Avro checker does. PROTOBUF comes as base64
``FileDescriptorProto`` (what confluent-kafka's Python serializer sends) or as ``.proto`` text (Java clients,
curl), which is compiled with ``grpc_tools.protoc`` against the references; both are built in a descriptor pool
to be validated. The text is served back as it was registered (Confluent would turn base64 into ``.proto`` text;
no printer here). JSON is checked against its meta-schema with ``jsonschema``. PROTOBUF and JSON compatibility is
a conservative subset, false for anything it cannot show to be safe (the reader is the new schema for BACKWARD,
the old one for FORWARD, both ways for FULL): PROTOBUF, every message of the writer's schema is in the reader's and
fields sharing a number keep their type and label; JSON, keywords other than ``properties`` and ``required`` are
unchanged, the reader requires nothing the writer did not, drops no property, and adds properties
only where the writer's content model is closed (``additionalProperties: false``).

Test knobs: ``requests(path_prefix)`` counts the requests that arrived (every one, failed ones too), ``down()`` /
``up()`` make every request a 503 (error code 50001), ``fail_next(n, status)`` fails only the next ``n``, and
``register(...)`` seeds a schema, with a fixed id if wanted. ``python -m testing.schema_registry [--port N]
[--user-info u:p] [--token T]`` serves until interrupted.
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import functools
import json
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TYPES = ("AVRO", "JSON", "PROTOBUF")
LEVELS = ("NONE", "BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.body = status, {"error_code": code, "message": message}


@dataclasses.dataclass
class _Schema:
    id: int
    type: str
    text: str
    references: list[dict[str, Any]]
    parsed: Any  # avro Schema, JSON document or FileDescriptorProto
    guid: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))


class SchemaRegistry:
    """A threaded registry on 127.0.0.1 (``port`` 0 = a free port); ``url`` once started."""

    def __init__(self, user_info: str | None = None, token: str | None = None, port: int = 0):
        self.credentials = {f"Basic {base64.b64encode(user_info.encode()).decode()}" if user_info else None}
        self.credentials |= {f"Bearer {token}" if token else None}
        self.credentials.discard(None)
        self.compatibility = "BACKWARD"
        self._levels: dict[str, str] = {}
        self._schemas: dict[int, _Schema] = {}
        self._ids: dict[tuple, int] = {}  # (type, canonical form, references) -> global id
        self._subjects: dict[str, list[int]] = {}  # subject -> the ids of its versions 1, 2, ...
        self._counts: collections.Counter[str] = collections.Counter()
        self._down, self._failures = False, collections.deque[tuple[int, int]]()
        self._lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve = functools.partial(self.server.serve_forever, poll_interval=0.05)  # a quick stop()
        self.thread = threading.Thread(target=serve, name="schema-registry", daemon=True)

    def start(self) -> SchemaRegistry:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> SchemaRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # test knobs
    def register(
        self, subject: str, schema: str, schema_type: str = "AVRO", references: Any = (), id: int | None = None
    ) -> int:  # noqa: A002
        """Register ``schema`` under ``subject`` as a client would, with the id ``id`` if given; its id. Raises
        ``RegistryError`` as the REST API would answer, ``ValueError`` when ``id`` belongs to another schema."""
        with self._lock:
            return self._register(subject, schema, schema_type, list(references), want_id=id)[0]

    def requests(self, path_prefix: str = "/") -> int:
        with self._lock:
            return sum(n for path, n in self._counts.items() if path.startswith(path_prefix))

    def down(self) -> None:
        self._down = True

    def up(self) -> None:
        self._down = False

    def fail_next(self, n: int, status: int = 503, error_code: int = 50001) -> None:
        """Answer the next ``n`` requests with ``status`` and ``error_code`` (retriable: 408, 429, 5xx)."""
        with self._lock:
            self._failures.extend([(status, error_code)] * n)

    # the REST API
    def handle(self, method: str, target: str, headers: Any, body: bytes) -> tuple[int, Any]:
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self._lock:
            self._counts[url.path] += 1
            failure = self._failures.popleft() if self._failures else (503, 50001) if self._down else None
        if failure:
            return failure[0], {"error_code": failure[1], "message": "Error in the backend datastore"}
        if self.credentials and headers.get("Authorization") not in self.credentials:
            return 401, {"error_code": 401, "message": "Unauthorized"}
        parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
        try:
            request = json.loads(body) if body else {}
        except ValueError as e:
            return 400, {"error_code": 400, "message": f"Unrecognized request body: {e}"}
        with self._lock:
            try:
                return 200, self._route(method, parts, query, request)
            except RegistryError as e:
                return e.status, e.body

    def _route(self, method: str, parts: list[str], query: dict[str, str], request: dict[str, Any]) -> Any:
        fmt = query.get("format")
        match method, parts:
            case "GET", []:
                return {}
            case "GET", ["schemas", "types"]:
                return list(TYPES)
            case "GET", ["schemas", "ids", sid]:
                return self._body(self._by_id(sid), fmt)
            case "GET", ["schemas", "guids", guid]:
                return self._body(next((s for s in self._schemas.values() if s.guid == guid), None), fmt)
            case "GET", ["schemas", "ids", sid, ("versions" | "subjects") as what]:
                schema_id = self._by_id(sid).id
                pairs = [
                    (s, v + 1) for s, ids in sorted(self._subjects.items()) for v, i in enumerate(ids) if i == schema_id
                ]
                return [{"subject": s, "version": v} for s, v in pairs] if what == "versions" else [s for s, _ in pairs]
            case "GET", ["subjects"]:
                return sorted(self._subjects)
            case "GET", ["subjects", subject, "versions"]:
                return list(range(1, len(self._versions(subject)) + 1))
            case "GET", ["subjects", subject, "versions", version]:
                return self._version_body(subject, self._version(subject, version), fmt)
            case "POST", ["subjects", subject, "versions"]:
                return {"id": self._register(subject, *self._request(request))[0]}
            case "POST", ["subjects", subject]:
                return self._version_body(
                    subject, self._register(subject, *self._request(request), lookup=True)[1], fmt
                )
            case "GET", ["config"]:
                return {"compatibilityLevel": self.compatibility}
            case "GET", ["config", subject]:
                if subject in self._levels or query.get("defaultToGlobal") == "true":
                    return {"compatibilityLevel": self._level(subject)}
                raise RegistryError(
                    404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            case "PUT", ["config", *subject] if len(subject) <= 1:
                level = str(request.get("compatibility") or request.get("compatibilityLevel") or "").upper()
                if level not in LEVELS:
                    raise RegistryError(422, 42203, f"Invalid compatibility level: {level or None}")
                if subject:
                    self._levels[subject[0]] = level
                else:
                    self.compatibility = level
                return {"compatibility": level}
            case "POST", ["compatibility", "subjects", subject, "versions", *version] if len(version) <= 1:
                text, kind, references = self._request(request)
                kind = kind.upper()
                parsed = self._parse(kind, text, references)[0]
                ids = self._versions(subject)
                ids = [ids[self._version(subject, version[0]) - 1]] if version else ids
                problems = self._problems(self._level(subject), kind, parsed, [self._schemas[i] for i in ids])
                answer: dict[str, Any] = {"is_compatible": not problems}
                return answer | ({"messages": problems} if query.get("verbose") == "true" else {})
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    @staticmethod
    def _request(request: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
        """(schema text, schema type, references) of a request body."""
        if not isinstance(request.get("schema"), str):
            raise RegistryError(422, 42201, "Empty schema")
        return request["schema"], request.get("schemaType") or "AVRO", list(request.get("references") or [])

    def _by_id(self, sid: str) -> _Schema:
        if sid.lstrip("-").isdigit() and int(sid) in self._schemas:
            return self._schemas[int(sid)]
        raise RegistryError(404, 40403, "Schema not found")

    def _versions(self, subject: str) -> list[int]:
        if subject not in self._subjects:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return self._subjects[subject]

    def _version(self, subject: str, version: Any) -> int:
        """The version number of ``version`` (a number, ``latest`` or -1) under ``subject``."""
        versions = self._versions(subject)
        if str(version) in ("latest", "-1"):
            return len(versions)
        if not str(version).isdigit() or int(version) == 0:
            raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id.")
        if int(version) > len(versions):
            raise RegistryError(404, 40402, f"Version {version} not found.")
        return int(version)

    def _body(self, schema: _Schema | None, fmt: str | None) -> dict[str, Any]:
        if schema is None:
            raise RegistryError(404, 40403, "Schema not found")
        text = schema.text
        if schema.type == "PROTOBUF" and fmt == "serialized":
            text = base64.b64encode(schema.parsed.SerializeToString()).decode()
        body: dict[str, Any] = {"schema": text, "guid": schema.guid}
        body |= {"schemaType": schema.type} if schema.type != "AVRO" else {}
        return body | ({"references": schema.references} if schema.references else {})

    def _version_body(self, subject: str, version: int, fmt: str | None) -> dict[str, Any]:
        schema_id = self._subjects[subject][version - 1]
        return {"subject": subject, "version": version, "id": schema_id} | self._body(self._schemas[schema_id], fmt)

    def _register(
        self, subject: str, text: str, kind: str, references: list, want_id: int | None = None, lookup: bool = False
    ) -> tuple[int, int]:
        """(id, version) of the schema under ``subject``, registering it unless ``lookup``."""
        kind = kind.upper()
        parsed, key = self._parse(kind, text, references)
        versions = self._subjects.get(subject, [])
        schema_id = self._ids.get(key)
        if schema_id in versions:
            return schema_id, versions.index(schema_id) + 1
        if lookup:
            self._versions(subject)  # 40401 for an unknown subject
            raise RegistryError(404, 40403, "Schema not found")
        if want_id not in (None, schema_id) and schema_id is not None:
            raise ValueError(f"this schema already has the id {schema_id}")
        if problems := self._problems(self._level(subject), kind, parsed, [self._schemas[i] for i in versions]):
            message = f'Schema being registered is incompatible with an earlier schema for subject "{subject}"'
            raise RegistryError(409, 409, f"{message}, details: {problems}")
        if schema_id is None:
            schema_id = want_id or max(self._schemas, default=0) + 1
            if schema_id in self._schemas:
                raise ValueError(f"id {schema_id} is taken by another schema")
            self._schemas[schema_id] = _Schema(schema_id, kind, text, references, parsed)
            self._ids[key] = schema_id
        self._subjects[subject] = [*versions, schema_id]
        return schema_id, len(versions) + 1

    def _level(self, subject: str) -> str:
        return self._levels.get(subject, self.compatibility)

    def _references(self, references: list[dict[str, Any]]) -> list[tuple[str, _Schema]]:
        """Each reference as (name, its schema), after the references of that schema, depth first."""
        out: list[tuple[str, _Schema]] = []
        for ref in references:
            try:
                schema = self._schemas[
                    self._subjects[ref["subject"]][self._version(ref["subject"], ref["version"]) - 1]
                ]
            except (KeyError, TypeError, RegistryError) as e:
                raise RegistryError(422, 42201, f"Invalid schema: reference {ref} not found ({e})") from None
            out += [*self._references(schema.references), (ref.get("name"), schema)]
        return out

    def _parse(self, kind: str, text: str, references: list[dict[str, Any]]) -> tuple[Any, tuple]:
        """(parsed schema, the registry's identity of it); 42201 when it is not valid."""
        if kind not in TYPES:
            raise RegistryError(422, 42201, f"Invalid schema type {kind}")
        refs = self._references(references)
        try:
            if kind == "PROTOBUF":
                parsed = _proto(text, refs)
                identity = parsed.SerializeToString(deterministic=True)
            else:
                document = json.loads(text)
                identity = json.dumps(document, sort_keys=True, separators=(",", ":"))
                parsed = _avro(document, refs) if kind == "AVRO" else _json_schema(document)
        except Exception as e:  # noqa: BLE001 - every parser's own error is an invalid schema
            raise RegistryError(422, 42201, f"Invalid schema {text!r}, details: {e}") from None
        return parsed, (kind, identity, json.dumps(references, sort_keys=True))

    def _problems(self, level: str, kind: str, new: Any, olds: list[_Schema]) -> list[str]:
        """Why ``new`` is not ``level``-compatible with ``olds`` (only the last one unless the level is
        transitive); empty if it is."""
        if level == "NONE":
            return []
        direction = level.removesuffix("_TRANSITIVE")
        problems: list[str] = []
        for old in olds if level.endswith("_TRANSITIVE") else olds[-1:]:
            if old.type != kind:
                problems.append(f"schema type changed from {old.type} to {kind}")
                continue
            check = {"AVRO": _avro_problems, "JSON": _json_problems, "PROTOBUF": _proto_problems}[kind]
            pairs = {"BACKWARD": [(new, old.parsed)], "FORWARD": [(old.parsed, new)]}.get(direction)
            for reader, writer in pairs or [(new, old.parsed), (old.parsed, new)]:
                problems += check(reader, writer)
        return problems


def _avro(document: Any, references: list[tuple[str, _Schema]]) -> Any:
    import avro.name
    import avro.schema

    names = avro.name.Names()
    seen: set[int] = set()
    for _, ref in references:  # each named type once, even when two references share one
        if ref.id not in seen:
            seen.add(ref.id)
            avro.schema.make_avsc_object(json.loads(ref.text), names)
    return avro.schema.make_avsc_object(document, names)


def _json_schema(document: Any) -> Any:
    import jsonschema

    if not isinstance(document, dict | bool):
        raise ValueError("a JSON schema is an object or a boolean")
    jsonschema.validators.validator_for(document).check_schema(document)
    return document


def _proto(text: str, references: list[tuple[str, _Schema]]) -> Any:
    """The ``FileDescriptorProto`` of base64 or ``.proto`` text, built in a pool with its references."""
    from confluent_kafka.schema_registry.common.protobuf import _init_pool
    from google.protobuf import descriptor_pb2, descriptor_pool

    deps = []
    for name, ref in references:
        dep = descriptor_pb2.FileDescriptorProto()
        dep.CopyFrom(ref.parsed)
        dep.name = name  # the name this schema imports it by
        deps.append(dep)
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except ValueError:  # not base64: .proto text
        fdp = _compile(text, deps)
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)  # the well-known types and confluent/meta.proto, which need no reference
    for dep in [*deps, fdp]:
        try:
            pool.FindFileByName(dep.name)
        except KeyError:
            pool.Add(dep)
    pool.FindFileByName(fdp.name)  # builds it: unknown types and missing imports fail here
    return fdp


def _compile(text: str, deps: list[Any]) -> Any:
    """``.proto`` text compiled by protoc (grpcio-tools, a test dependency), its imports taken from ``deps``."""
    import grpc_tools
    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "_registry_schema_.proto").write_text(text)
        (Path(tmp) / "deps.desc").write_bytes(descriptor_pb2.FileDescriptorSet(file=deps).SerializeToString())
        include = Path(grpc_tools.__file__).parent / "_proto"  # the well-known types' .proto files
        args = [f"-I{tmp}", f"-I{include}", "--descriptor_set_in=deps.desc", "--descriptor_set_out=out.desc"]
        protoc = [sys.executable, "-m", "grpc_tools.protoc", *args, "_registry_schema_.proto"]
        done = subprocess.run(protoc, cwd=tmp, capture_output=True, text=True)
        if done.returncode:
            raise ValueError(done.stderr.strip())
        return descriptor_pb2.FileDescriptorSet.FromString((Path(tmp) / "out.desc").read_bytes()).file[0]


def _avro_problems(reader: Any, writer: Any) -> list[str]:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    kinds = ", ".join(i.name for i in result.incompatibilities)
    return [f"{kinds} at {', '.join(sorted(result.locations))}: {', '.join(sorted(result.messages))}"]


def _json_problems(reader: Any, writer: Any, at: str = "#") -> list[str]:
    if reader == writer:
        return []
    if not (isinstance(reader, dict) and isinstance(writer, dict)):
        return [f"{at}: changed"]
    r, w = dict(reader), dict(writer)
    rp, wp = r.pop("properties", {}), w.pop("properties", {})
    rq, wq = set(r.pop("required", [])), set(w.pop("required", []))
    out = [] if r == w else [f"{at}: keywords other than properties and required changed"]
    out += [f"{at}/properties/{k}: removed" for k in sorted(wp.keys() - rp.keys())]
    if rp.keys() - wp.keys() and w.get("additionalProperties") is not False:
        out.append(f"{at}: properties {sorted(rp.keys() - wp.keys())} added to an open content model")
    out += [f"{at}/properties/{k}: newly required" for k in sorted(rq - wq)]
    return out + [
        p for k in sorted(rp.keys() & wp.keys()) for p in _json_problems(rp[k], wp[k], f"{at}/properties/{k}")
    ]


def _proto_problems(reader: Any, writer: Any) -> list[str]:
    def messages(fdp: Any) -> dict[str, dict[int, tuple]]:
        out: dict[str, dict[int, tuple]] = {}
        todo = [(fdp.package, m) for m in fdp.message_type]
        while todo:
            prefix, m = todo.pop()
            name = f"{prefix}.{m.name}".lstrip(".")
            out[name] = {f.number: (f.type, f.type_name, f.label) for f in m.field}
            todo += [(name, n) for n in m.nested_type]
        return out

    new, old = messages(reader), messages(writer)
    out = [f"message {name} removed" for name in sorted(old.keys() - new.keys())]
    for name in sorted(old.keys() & new.keys()):
        out += [
            f"{name} field {n}: type changed"
            for n in sorted(old[name].keys() & new[name].keys())
            if old[name][n] != new[name][n]
        ]
    return out


def _handler(registry: SchemaRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, answer = registry.handle(self.command, self.path, self.headers, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m testing.schema_registry", description="Serve an in-memory Schema Registry until interrupted."
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--user-info", help="user:password that Basic auth must give")
    parser.add_argument("--token", help="the token that Bearer auth must give")
    args = parser.parse_args(argv)
    registry = SchemaRegistry(user_info=args.user_info, token=args.token, port=args.port)
    print(registry.url, flush=True)
    try:
        registry.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        registry.server.server_close()


if __name__ == "__main__":
    main()
