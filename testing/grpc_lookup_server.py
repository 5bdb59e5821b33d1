"""A gRPC ``dagger.examples.CustomerService`` built from the descriptor set at run time (no generated stubs),
for the gRPC lookup tests and examples.

``GetCustomer(CustomerRequest{customer_id})`` answers ``CustomerReply{customer_id, name: "name-<id>", age:
len(id), joined: 2026-01-02T03:04:05Z, labels: {"tier": "gold"}}``; id ``missing`` → ``NOT_FOUND``, ``slow`` →
answers after 2 s. ``metadata`` keeps the last call's metadata; ``calls`` counts calls.
"""

from __future__ import annotations

import time
from concurrent import futures
from pathlib import Path
from typing import Any

EXAMPLES_DESC = Path(__file__).resolve().parents[1] / "descriptors" / "examples.desc"


class CustomerLookupServer:
    """``start()`` → ``port``; ``stop()``."""

    def __init__(self, descriptor_set: Path = EXAMPLES_DESC):
        self.descriptor_set = descriptor_set
        self.metadata: dict[str, str] = {}
        self.calls = 0
        self.port = 0
        self._server: Any = None

    def start(self) -> CustomerLookupServer:
        import grpc
        from google.protobuf import descriptor_pb2, message_factory

        from dagger.schema.descriptor_sets import build_pool

        fds = descriptor_pb2.FileDescriptorSet.FromString(self.descriptor_set.read_bytes())
        service = build_pool(fds).FindServiceByName("dagger.examples.CustomerService")
        method = service.FindMethodByName("GetCustomer")
        request_class = message_factory.GetMessageClass(method.input_type)
        reply_class = message_factory.GetMessageClass(method.output_type)

        def get_customer(request: Any, context: Any) -> Any:
            self.calls += 1
            self.metadata = dict(context.invocation_metadata())
            if request.customer_id == "missing":
                context.abort(grpc.StatusCode.NOT_FOUND, f"no customer {request.customer_id}")
            if request.customer_id == "slow":
                time.sleep(2)
            reply = reply_class(customer_id=request.customer_id, name=f"name-{request.customer_id}")
            reply.age = len(request.customer_id)
            reply.joined.FromJsonString("2026-01-02T03:04:05Z")
            reply.labels["tier"] = "gold"
            reply.balance = 12.5 * len(request.customer_id)
            reply.points = 2**53 + len(request.customer_id)
            return reply

        handler = grpc.method_handlers_generic_handler(
            service.full_name,
            {
                method.name: grpc.unary_unary_rpc_method_handler(
                    get_customer,
                    request_deserializer=request_class.FromString,
                    response_serializer=reply_class.SerializeToString,
                )
            },
        )
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
