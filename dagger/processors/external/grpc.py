"""gRPC lookups (``external_source.grpc``): unary calls built from descriptors at run time (no generated stubs).

As Dagger: ``request_pattern`` is a JSON template (``%s`` from ``request_variables``; single quotes become double
quotes) parsed into ``grpc_request_proto_schema``; the call goes to ``endpoint:service_port`` (plaintext) as
``grpc_method_url`` (``package.Service/Method``) with ``headers`` as metadata; the reply
(``grpc_response_proto_schema``) is printed to JSON with proto field names and default values, and
``output_mapping`` paths read it. ``stream_timeout`` is the call deadline. Failures, ``fail_on_errors``, the
empty-input skip, cache, retries (``UNAVAILABLE`` and deadline) and metrics work as for HTTP; a ``NOT_FOUND``
status counts as ``failures_code404``.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from dagger.processors.external.base import AsyncCaller, LookupError_, as_text


class GrpcCaller(AsyncCaller):
    """Executor side: one ``grpc.aio`` channel per task, reused by every batch of the task."""

    def __init__(self, spec: dict[str, Any]):
        import grpc
        from google.protobuf import descriptor_pb2, message_factory

        from dagger.schema.descriptor_sets import build_pool  # start-up: loads google

        super().__init__(spec)
        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["descriptor_set_b64"]))
        pool = build_pool(fds)
        self.request_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(spec["request_message"]))
        response_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(spec["response_message"]))

        async def make() -> Any:
            channel = grpc.aio.insecure_channel(f"{spec['endpoint']}:{spec['service_port']}")
            call = channel.unary_unary(
                "/" + spec["method"].lstrip("/"),
                request_serializer=self.request_class.SerializeToString,
                response_deserializer=response_class.FromString,
            )
            return channel, call

        self.channel, self.method = self.loop.run_until_complete(make())
        self.metadata = tuple((k.lower(), str(v)) for k, v in spec["headers"].items())

    async def _aclose(self) -> None:
        await self.channel.close()

    def _request(self, text: str) -> Any:
        from google.protobuf import json_format

        try:
            return json_format.Parse(text, self.request_class())
        except json_format.ParseError as exc:
            raise LookupError_(
                f"{self.spec['name']}: request_pattern gave {text!r}, which is not a {self.spec['request_message']}: {exc}"
            ) from None

    async def _attempt(self, text: str, counts: dict, latencies: list, last: bool) -> tuple[bool, Any]:
        """One unary call of the request ``text`` (JSON): the reply as a JSON dict."""
        import grpc
        from google.protobuf import json_format

        request = self._request(text)
        counts["calls"] += 1
        started = time.monotonic()
        try:
            reply = await self.method(request, timeout=self.spec["stream_timeout"] / 1000, metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            latencies.append((time.monotonic() - started) * 1000)
            code = exc.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                counts["timeouts"] += 1
            elif code == grpc.StatusCode.NOT_FOUND:
                counts["failures_code404"] += 1
            else:
                counts["failures_other"] += 1
            retriable = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            where = f"{self.spec['name']} ({self.spec['method']} {text})"
            return self._failed(f"{where} failed with {code.name}: {exc.details()}", last, retriable)
        latencies.append((time.monotonic() - started) * 1000)
        counts["success"] += 1
        return False, json_format.MessageToDict(
            reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )


def build_grpc_requests(spec: dict[str, Any], columns: dict[str, list[Any]], rows: int) -> list[str | None]:
    """The JSON text of each row's request (single quotes → double quotes), or None when all variables are empty."""
    variables = spec["request_variables"]
    out: list[str | None] = []
    for i in range(rows):
        values = [as_text(columns[c][i]) for c in variables]
        if values and all(v in ("", "null") for v in values):
            out.append(None)
            continue
        text = spec["request_pattern"] % tuple(values) if variables else spec["request_pattern"]
        out.append(text.replace("'", '"'))
    return out
