"""Dagger's four external sources (``http``, ``es``, ``pg``, ``grpc``): each one's settings model (the keys of its
``external_source`` entries) beside its planner, registered as lookups (:mod:`dagger.plugins.lookup`). A planner
checks its entry against the SQL output's columns and builds the spec its caller runs on the executors
(:mod:`.http`, :mod:`.postgres`, :mod:`.grpc`). Runs on the driver.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any, Literal

from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.optional import require
from dagger.plugins.lookup import Lookup, LookupSettings, OutputPath, register_lookup
from dagger.processors.external.base import check_pattern
from dagger.processors.external.planning import output_paths, plan_lookup, variable_columns, with_sets


class HttpLookupSettings(LookupSettings):
    """An HTTP endpoint called once per row (Dagger's `external_source.http`)."""

    endpoint: str
    endpoint_variables: str | None = None
    verb: Literal["get", "post", "put", "GET", "POST", "PUT", "Get", "Post", "Put"]
    request_pattern: str
    request_variables: str | None = None
    header_pattern: str | None = None
    header_variables: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: int
    output_mapping: dict[str, OutputPath]


class EsLookupSettings(LookupSettings):
    """An Elasticsearch document fetched once per row (Dagger's `external_source.es`)."""

    host: str
    port: int
    user: str | None = None
    password: str | None = None
    endpoint_pattern: str
    endpoint_variables: str | None = None
    connect_timeout: int
    socket_timeout: int
    retry_timeout: int
    output_mapping: dict[str, OutputPath]


class PgLookupSettings(LookupSettings):
    """A PostgreSQL query run once per row (Dagger's `external_source.pg`)."""

    host: str
    port: int
    user: str
    password: str
    database: str
    query_pattern: str
    query_variables: str | None = None
    connect_timeout: int
    idle_timeout: int
    output_mapping: dict[str, str]


class GrpcLookupSettings(LookupSettings):
    """A unary gRPC call made once per row (Dagger's `external_source.grpc`)."""

    endpoint: str
    service_port: int
    grpc_method_url: str
    grpc_request_proto_schema: str
    grpc_response_proto_schema: str
    grpc_stencil_url: str | None = None
    request_pattern: str
    request_variables: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: int | None = None
    output_mapping: dict[str, OutputPath]


class HttpLookup(Lookup):
    """Dagger's ``http``: an HTTP call per row."""

    settings_model = HttpLookupSettings

    def plan(self, df: Any) -> tuple[Any, list[tuple[str, str]]]:
        """Plan one HTTP source: check it against the SQL columns, type its outputs, add its columns."""
        source, index, context, where = self.settings, self.index, self.context, self.where
        if source.capacity <= 0:
            raise DaggerConfigError(f"{where}.capacity must be > 0, got {source.capacity}")
        variables = {
            key: variable_columns(df, getattr(source, key), f"{where}.{key}")
            for key in ("endpoint_variables", "request_variables", "header_variables")
        }
        check_pattern(source.endpoint, variables["endpoint_variables"], f"{where}.endpoint")
        check_pattern(source.request_pattern, variables["request_variables"], f"{where}.request_pattern")
        if source.header_pattern:
            check_pattern(source.header_pattern, variables["header_variables"], f"{where}.header_pattern")
            sample = source.header_pattern % tuple("x" for _ in variables["header_variables"])
            try:
                if not isinstance(json.loads(sample), dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                raise DaggerConfigError(f"{where}.header_pattern must be a JSON object template: {exc}") from None
        spec = {
            "verb": source.verb,
            "endpoint": source.endpoint,
            "request_pattern": source.request_pattern,
            "header_pattern": source.header_pattern,
            "headers": dict(source.headers),
            **variables,
        }
        return plan_lookup(df, "http", source, index, context, where, output_paths(source.output_mapping, where), spec)


class EsLookup(Lookup):
    """Dagger's ``es``: an Elasticsearch document per row."""

    settings_model = EsLookupSettings

    def plan(self, df: Any) -> tuple[Any, list[tuple[str, str]]]:
        """Plan one Elasticsearch source: a document GET per row on the comma-separated hosts (same port)."""
        source, index, context, where = self.settings, self.index, self.context, self.where
        if source.capacity <= 0:
            raise DaggerConfigError(f"{where}.capacity must be > 0, got {source.capacity}")
        variables = variable_columns(df, source.endpoint_variables, f"{where}.endpoint_variables")
        check_pattern(source.endpoint_pattern, variables, f"{where}.endpoint_pattern")
        headers = {}
        if source.user:
            token = base64.b64encode(f"{source.user}:{source.password or ''}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        hosts = [h.strip() for h in source.host.split(",") if h.strip()]
        spec = {
            "hosts": [(h if "://" in h else f"http://{h}") + f":{source.port}" for h in hosts],
            "endpoint_pattern": source.endpoint_pattern,
            "endpoint_variables": variables,
            "request_variables": [],
            "header_variables": [],
            "headers": headers,
            "socket_timeout": source.socket_timeout,
            "retry_timeout": source.retry_timeout,
        }
        return plan_lookup(df, "es", source, index, context, where, output_paths(source.output_mapping, where), spec)


class PgLookup(Lookup):
    """Dagger's ``pg``: a PostgreSQL query per row."""

    settings_model = PgLookupSettings

    def plan(self, df: Any) -> tuple[Any, list[tuple[str, str]]]:
        """Plan one Postgres source: a query per row, at most one result row, columns mapped by name."""
        source, index, context, where = self.settings, self.index, self.context, self.where

        require("asyncpg", "postgres", f"{where} (a Postgres lookup)")
        if source.capacity <= 0:
            raise DaggerConfigError(f"{where}.capacity must be > 0 (it is also the pool size), got {source.capacity}")
        variables = variable_columns(df, source.query_variables, f"{where}.query_variables")
        check_pattern(source.query_pattern, variables, f"{where}.query_pattern")
        spec = {
            "host": source.host,
            "port": source.port,
            "user": source.user,
            "password": source.password,
            "database": source.database,
            "query_pattern": source.query_pattern,
            "query_variables": variables,
            "idle_timeout": source.idle_timeout,
        }
        return plan_lookup(df, "pg", source, index, context, where, dict(source.output_mapping), spec)


class GrpcLookup(Lookup):
    """Dagger's ``grpc``: a unary gRPC call per row."""

    settings_model = GrpcLookupSettings

    def plan(self, df: Any) -> tuple[Any, list[tuple[str, str]]]:
        """Plan one gRPC source: a unary call per row, request and reply types from the job's descriptors."""
        source, index, context, where = self.settings, self.index, self.context, self.where
        if source.capacity <= 0:
            raise DaggerConfigError(f"{where}.capacity must be > 0, got {source.capacity}")
        if source.grpc_stencil_url:  # Dagger adds these sets to its registry; here they serve this source
            context = dataclasses.replace(
                context, descriptors=with_sets(context, source.grpc_stencil_url, f"{where}.grpc_stencil_url")
            )
        if "/" not in source.grpc_method_url.strip("/"):
            raise DaggerConfigError(
                f"{where}.grpc_method_url {source.grpc_method_url!r} must be package.Service/Method"
            )
        service, _, method = source.grpc_method_url.strip("/").partition("/")
        found = None
        try:
            found = context.descriptors.pool.FindServiceByName(service).FindMethodByName(method)
        except (KeyError, AttributeError):
            found = None
        request = context.descriptors.find_message(
            source.grpc_request_proto_schema, f"{where}.grpc_request_proto_schema"
        )
        response = context.descriptors.find_message(
            source.grpc_response_proto_schema, f"{where}.grpc_response_proto_schema"
        )
        if found is not None and (found.input_type.full_name, found.output_type.full_name) != (
            request.full_name,
            response.full_name,
        ):
            raise DaggerConfigError(
                f"{where}: {source.grpc_method_url} takes {found.input_type.full_name} and returns "
                f"{found.output_type.full_name}, not {request.full_name} / {response.full_name}"
            )
        variables = variable_columns(df, source.request_variables, f"{where}.request_variables")
        check_pattern(source.request_pattern, variables, f"{where}.request_pattern")
        spec = {
            "endpoint": source.endpoint,
            "service_port": source.service_port,
            "method": source.grpc_method_url.strip("/"),
            "request_message": request.full_name,
            "response_message": response.full_name,
            "request_pattern": source.request_pattern,
            "request_variables": variables,
            "endpoint_variables": [],
            "header_variables": [],
            "headers": dict(source.headers),
        }
        mapping = output_paths(source.output_mapping, where)
        return plan_lookup(df, "grpc", source, index, context, where, mapping, spec, response=response)


register_lookup("http", HttpLookupSettings, HttpLookup)
register_lookup("es", EsLookupSettings, EsLookup)
register_lookup("pg", PgLookupSettings, PgLookup)
register_lookup("grpc", GrpcLookupSettings, GrpcLookup)
