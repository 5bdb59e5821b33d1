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

import asyncio
import base64
import time
from typing import Any

from dagger.processors.external.base import LookupError_, as_text

_CACHES: dict[str, dict[Any, tuple[float, Any]]] = {}


class GrpcCaller:
    """Executor side: one ``grpc.aio`` channel per task, reused by every batch of the task."""

    def __init__(self, spec: dict[str, Any]):
        import grpc
        from google.protobuf import descriptor_pb2, message_factory

        from dagger.schema.registry import build_pool

        self.spec = spec
        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(spec["descriptor_set_b64"]))
        pool = build_pool(fds)
        self.request_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(spec["request_message"]))
        response_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(spec["response_message"]))
        self.loop = asyncio.new_event_loop()

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
        self.cache = _CACHES.setdefault(spec["name"], {}) if spec["cache_ttl_seconds"] else None

    def close(self) -> None:
        self.loop.run_until_complete(self.channel.close())
        self.loop.close()

    def call_all(self, requests: list[str | None]) -> tuple[list[Any], dict[str, int], list[float]]:
        """The reply as a JSON dict (or None) per request text (None: skipped), counts and latencies."""
        counts = {k: 0 for k in ("calls", "success", "empty_input", "cache_hits", "timeouts", "retries")}
        counts.update({"failures_code404": 0, "failures_other": 0})
        latencies: list[float] = []
        semaphore = asyncio.Semaphore(self.spec["capacity"])

        async def one(text: str | None) -> Any:
            if text is None:
                counts["empty_input"] += 1
                return None
            if self.cache is not None:
                hit = self.cache.get(text)
                if hit is not None and hit[0] > time.monotonic():
                    counts["cache_hits"] += 1
                    return hit[1]
            request = self._request(text)
            attempt = 0
            async with semaphore:
                while True:
                    retriable, answer = await self._call(
                        request, text, counts, latencies, attempt >= self.spec["retries"]
                    )
                    if not retriable:
                        break
                    attempt += 1
                    counts["retries"] += 1
                    await asyncio.sleep(self.spec["retry_backoff_ms"] / 1000 * 2 ** (attempt - 1))
            if self.cache is not None and answer is not None:
                self.cache[text] = (time.monotonic() + self.spec["cache_ttl_seconds"], answer)
            return answer

        async def everything() -> list[Any]:
            return await asyncio.gather(*(one(r) for r in requests))

        return self.loop.run_until_complete(everything()), counts, latencies

    def _request(self, text: str) -> Any:
        from google.protobuf import json_format

        try:
            return json_format.Parse(text, self.request_class())
        except json_format.ParseError as exc:
            raise LookupError_(
                f"{self.spec['name']}: request_pattern gave {text!r}, which is not a {self.spec['request_message']}: {exc}"
            ) from None

    async def _call(self, request: Any, text: str, counts: dict, latencies: list, last: bool) -> tuple[bool, Any]:
        import grpc
        from google.protobuf import json_format

        counts["calls"] += 1
        started = time.monotonic()
        where = f"{self.spec['name']} ({self.spec['method']} {text})"
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
            message = f"{where} failed with {code.name}: {exc.details()}"
            if retriable and not last:
                return True, None
            if self.spec["fail_on_errors"]:
                raise LookupError_(message + " (fail_on_errors is true)") from None
            return False, None
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
