"""The Open Inference Protocol over gRPC: `inference.GRPCInferenceService`, as KServe and
Triton serve it, beside the REST protocols (`headwater serve --grpc-port P`).

ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata and ModelInfer, for every
model the server serves, through the same path as a V2 REST request: the endpoint's traffic
policy picks the version (canaries included; `x-request-id` metadata keeps a client on one),
the inputs are checked against the model's metadata, the prediction goes through the
version's predictor (batching included) and every stage is timed for the hooks (Prometheus,
Triton's statistics) under the protocol `grpc`. Tensors come as typed `contents` or as
`raw_input_contents` (what Triton's client sends); outputs go back as `raw_output_contents`,
which both clients read. With a token, every call but the health checks must carry
`authorization: Bearer TOKEN` metadata.

The messages are Triton's client's compiled ones (`tritonclient.grpc.service_pb2`): the same
wire format as KServe's, without a code generator at install time. Errors are gRPC statuses:
a bad input INVALID_ARGUMENT, an unknown model NOT_FOUND, one not loaded UNAVAILABLE, no
token UNAUTHENTICATED, each with the message the REST protocols give.

Each server process listens on the port itself (`SO_REUSEPORT`: with `--workers N` the kernel
spreads connections over the processes, as it does for the REST socket). A request may be as
large as a REST body (`--max-body-mb`), not gRPC's default 4 MiB.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc

from headwater._version import __version__
from headwater.errors import UserError
from headwater.security import tokens_match
from headwater.serving.context import ServingContext
from headwater.serving.errors import InvalidInputError, ProtocolError
from headwater.serving.observe import logger
from headwater.serving.tensors import datatype_of, decode, to_bytes
from headwater.serving.v2 import EXTENSIONS, SERVER_NAME, InferRequest, model_inputs

PROTOCOL = "grpc"
_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.FAILED_PRECONDITION,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    501: grpc.StatusCode.UNIMPLEMENTED,
    503: grpc.StatusCode.UNAVAILABLE,
}
#: `InferTensorContents` fields by V2 datatype.
_CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
Handler = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]


class InferenceService(pb_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
    """The service over one app's `ServingContext`; `token`: what calls must carry."""

    def __init__(self, context: ServingContext, token: str | None) -> None:
        self._serving = context
        self._token = token

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return pb.ServerReadyResponse(ready=self._serving.repository.ready)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        async with self._call(context, request.name, request.version, "ready") as version:
            return pb.ModelReadyResponse(ready=version.runtime.ready)

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        await self._check_token(context)
        return pb.ServerMetadataResponse(
            name=SERVER_NAME, version=__version__, extensions=list(EXTENSIONS)
        )

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        async with self._call(context, request.name, request.version, "metadata") as version:
            metadata = version.runtime.metadata
            endpoint = self._serving.repository.endpoint(request.name)

            def tensors(specs: Any) -> list[Any]:
                return [
                    pb.ModelMetadataResponse.TensorMetadata(
                        name=s.name, datatype=s.datatype, shape=list(s.shape)
                    )
                    for s in specs
                ]

            return pb.ModelMetadataResponse(
                name=request.name,
                versions=list(endpoint.state.versions),
                platform=metadata.platform,
                inputs=tensors(metadata.inputs),
                outputs=tensors(metadata.outputs),
            )

    async def ModelInfer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        async with self._call(
            context, request.model_name, request.model_version, "infer"
        ) as version:
            started = time.perf_counter()
            parsed = _parse(request)
            self._serving.stage(version, "preprocess", started)
            inputs = model_inputs(parsed, version.runtime.metadata)
            asked = version.runtime.metadata.check_outputs(parsed.outputs)
            outputs = await self._serving.predict(version, inputs, asked)
            started = time.perf_counter()
            answer = pb.ModelInferResponse(
                model_name=version.endpoint, model_version=version.version, id=request.id
            )
            for name, value in outputs.items():
                array = np.asarray(value)
                answer.outputs.add(name=name, datatype=datatype_of(array), shape=array.shape)
                answer.raw_output_contents.append(to_bytes(array))
            self._serving.stage(version, "postprocess", started)
            return answer

    async def _check_token(self, context: grpc.aio.ServicerContext) -> None:
        if self._token is None:
            return
        given = dict(context.invocation_metadata() or ()).get("authorization", "")
        scheme, _, token = str(given).partition(" ")
        if scheme.lower() != "bearer" or not tokens_match(token.strip(), self._token):
            said = (
                "the bearer token is not this server's"
                if given
                else ("this server needs a token: send 'authorization: Bearer <token>' metadata")
            )
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, said)

    @asynccontextmanager
    async def _call(
        self, context: grpc.aio.ServicerContext, name: str, label: str, verb: str
    ) -> AsyncIterator[Any]:
        """The version a call to model `name` (version `label`, "" for the policy's) is
        served by; what goes wrong answered as a gRPC status, the request told to the hooks."""
        await self._check_token(context)
        started = time.perf_counter()
        status, served = 200, None
        key = dict(context.invocation_metadata() or ()).get("x-request-id")
        try:
            endpoint = self._serving.repository.endpoint(name)
            async with endpoint.serving(label or None, key=key) as version:
                served = version.version
                yield version
        except ProtocolError as exc:
            status = exc.status
            await context.abort(_CODES.get(exc.status, grpc.StatusCode.INTERNAL), str(exc))
        except UserError as exc:
            status = 400
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Exception:
            status = 500  # counted as failed; gRPC answers UNKNOWN and logs it
            raise
        finally:
            self._after_request(name, served, verb, status, time.perf_counter() - started)

    def _after_request(
        self, name: str, version: str | None, verb: str, status: int, took: float
    ) -> None:
        for hook in self._serving.hooks:
            try:
                hook.after_request(
                    endpoint=name if version is not None else None,
                    version=version,
                    protocol=PROTOCOL,
                    verb=verb,
                    status=status,
                    duration_s=took,
                )
            except Exception:  # a broken exporter must not fail the call it measures
                logger.exception("serving hook %r failed in after_request", hook)


def _parse(request: Any) -> InferRequest:
    """A `ModelInferRequest`'s inputs decoded and checked as a REST request's are."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise InvalidInputError(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs: "
            "send one per input, or typed contents for every input"
        )
    inputs = []
    for i, tensor in enumerate(request.inputs):
        doc: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.shape),
        }
        field = _CONTENTS.get(tensor.datatype)
        if not raw:
            if field is None:
                raise InvalidInputError(f"inputs[{i}]: unknown datatype {tensor.datatype!r}")
            doc["data"] = list(getattr(tensor.contents, field))
        name, array = decode(doc, where=f"inputs[{i}]", raw=raw[i] if raw else None)
        inputs.append((name, tensor.datatype, array))
    names = [n for n, _, _ in inputs]
    if not names:
        raise InvalidInputError("a ModelInferRequest needs inputs")
    if len(set(names)) != len(names):
        raise InvalidInputError(f"inputs name the same tensor twice: {names}")
    outputs = [o.name for o in request.outputs] or None
    return InferRequest(request.id or None, {}, inputs, outputs)


async def start(
    serving: ServingContext, host: str, port: int, token: str | None
) -> grpc.aio.Server:
    """Listen on `host:port` (shared with this server's other processes) and serve.

    Raises:
        UserError: The address cannot be bound.
    """
    # Requests as large as the REST protocols take (gRPC's own default is 4 MiB).
    size = serving.max_body_bytes
    server = grpc.aio.server(
        options=[
            ("grpc.so_reuseport", 1),
            ("grpc.max_receive_message_length", size),
            ("grpc.max_send_message_length", -1),
        ]
    )
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(serving, token), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise UserError(f"cannot listen for gRPC on {address}: {exc}") from exc
    if not bound:
        raise UserError(f"cannot listen for gRPC on {address}: choose another --grpc-port")
    await server.start()
    return server
