"""The Open Inference Protocol (KServe V2) over REST, plus its `explain` extension.

    GET  /v2                                   {"name", "version", "extensions": ["explain",
                                                "model_configuration", "statistics",
                                                "binary_tensor_data"]}
    GET  /v2/health/live                       {"live": true}
    GET  /v2/health/ready                      {"ready": true}; 503 {"error"} while a model has
                                               no version loaded
    GET  /v2/models/{m}[/versions/{v}]         {"name", "versions", "platform", "inputs",
                                                "outputs", "parameters"?: {"input_form",
                                                ...}}
    GET  /v2/models/{m}[/versions/{v}]/ready   {"name", "ready": true}; 404 unknown, 503 not
                                               loaded
    POST /v2/models/{m}[/versions/{v}]/infer   {"id"?, "parameters"?, "inputs": [...],
                                                "outputs"?: [{"name"}]}
                                               -> {"model_name", "model_version", "id"?,
                                                   "outputs": [{"name", "datatype", "shape",
                                                                "data"}]}
    POST /v2/models/{m}[/versions/{v}]/explain an infer request (its "parameters" are the
                                               explanation's: method, target, ...) -> an
                                               infer response whose outputs are the
                                               predictions, "attributions" and, when known,
                                               "feature_names", "bias", "targets", "deltas"

The spec says a health answer is its status and its body is empty; KServe's server answers
the bodies above and its Python client (`kserve.InferenceRESTClient`) reads them, while
Triton's client reads only the status: so Headwater answers as KServe does.

`infer` and `explain` also take and give tensors as binary data after a JSON header (Triton's
binary tensor data extension, what Triton's and KServe's clients send by default; see
`headwater.serving.binary`).

Without `/versions/{v}` the endpoint's traffic policy picks the version. Inputs are checked
against the model's metadata: names, datatypes (numbers convert to a floating input, integers
to an integer input; BOOL and BYTES only to their own) and fixed dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from headwater._version import __version__
from headwater.serving import binary, triton
from headwater.serving.context import ServingContext, request_key
from headwater.serving.endpoint import ModelVersion
from headwater.serving.errors import InvalidInputError, ModelNotReadyError
from headwater.serving.runtimes.base import Explanation, ModelMetadata
from headwater.serving.tensors import conform, datatype_of, decode, encode, to_bytes
from headwater.serving.wire import OFFLOAD_BYTES, json_response, read_body

router = APIRouter()
PROTOCOL = "v2"
SERVER_NAME = "headwater"
#: Ours, then Triton's, as `GET /v2` lists them.
EXTENSIONS = ("explain", *triton.EXTENSIONS, "binary_tensor_data")


@dataclass(frozen=True)
class InferRequest:
    """A parsed V2 inference request: its id, parameters, decoded inputs and outputs asked,
    and which outputs to answer as binary data (`headwater.serving.binary`): those named in
    `binary` as True, and, when `binary_default`, those it does not name."""

    id: str | None
    parameters: dict[str, Any]
    inputs: list[tuple[str, str, np.ndarray]]
    outputs: list[str] | None
    binary_default: bool = False
    binary: dict[str, bool] = field(default_factory=dict)

    def is_binary(self, output: str) -> bool:
        """Whether `output` is answered as binary data."""
        return self.binary.get(output, self.binary_default)


@router.get("/v2")
async def server_metadata(request: Request) -> Response:
    """The server's name, version and protocol extensions."""
    return json_response(
        {"name": SERVER_NAME, "version": __version__, "extensions": list(EXTENSIONS)}
    )


@router.get("/v2/health/live")
async def live(request: Request) -> Response:
    """`{"live": true}` while the server answers at all."""
    return json_response({"live": True})


@router.get("/v2/health/ready")
async def ready(request: Request) -> Response:
    """`{"ready": true}` when every served model has a version ready, else 503 naming those
    without."""
    repository = ServingContext.of(request).repository
    if repository.ready:
        return json_response({"ready": True})
    waiting = [e.name for e in repository if not e.ready] or ["(no models)"]
    raise ModelNotReadyError(f"not ready: no version loaded for {', '.join(waiting)}")


@router.get("/v2/models/{name}")
async def model_metadata(request: Request, name: str) -> Response:
    """The model's metadata (the version the policy picks)."""
    return await _metadata(request, name, None)


@router.get("/v2/models/{name}/versions/{version}")
async def version_metadata(request: Request, name: str, version: str) -> Response:
    """One version's metadata."""
    return await _metadata(request, name, version)


@router.get("/v2/models/{name}/ready")
async def model_ready(request: Request, name: str) -> Response:
    """`{"name", "ready": true}` when the model has a version ready; 404 unknown, 503 not
    ready."""
    return await _ready(request, name, None)


@router.get("/v2/models/{name}/versions/{version}/ready")
async def version_ready(request: Request, name: str, version: str) -> Response:
    """`{"name", "ready": true}` when that version is loaded; 404 otherwise."""
    return await _ready(request, name, version)


@router.post("/v2/models/{name}/infer")
async def infer(request: Request, name: str) -> Response:
    """Inference on typed tensors."""
    return await _infer(request, name, None)


@router.post("/v2/models/{name}/versions/{version}/infer")
async def version_infer(request: Request, name: str, version: str) -> Response:
    """Inference on one version."""
    return await _infer(request, name, version)


@router.post("/v2/models/{name}/explain")
async def explain(request: Request, name: str) -> Response:
    """The `explain` extension: predictions and attributions as output tensors."""
    return await _explain(request, name, None)


@router.post("/v2/models/{name}/versions/{version}/explain")
async def version_explain(request: Request, name: str, version: str) -> Response:
    """The `explain` extension on one version."""
    return await _explain(request, name, version)


async def _metadata(request: Request, name: str, label: str | None) -> Response:
    context = ServingContext.of(request)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(label, key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "metadata")
        metadata = version.runtime.metadata
        answer: dict[str, Any] = {
            "name": name,
            "versions": list(endpoint.state.versions),
            "platform": metadata.platform,
            "inputs": [i.to_json() for i in metadata.inputs],
            "outputs": [o.to_json() for o in metadata.outputs],
        }
        if metadata.parameters:
            answer["parameters"] = metadata.parameters
        return json_response(answer)


async def _ready(request: Request, name: str, label: str | None) -> Response:
    context = ServingContext.of(request)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(label, key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "ready")
        if not version.runtime.ready:
            raise ModelNotReadyError(f"model {name!r} version {version.version} is not loaded")
        return json_response({"name": name, "ready": True})


async def _infer(request: Request, name: str, label: str | None) -> Response:
    context = ServingContext.of(request)
    size, body, data = await _read(request, context.max_body_bytes)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(label, key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "infer")
        metadata = version.runtime.metadata
        offload = size > OFFLOAD_BYTES
        parsed = await context.run_stage(
            version, "preprocess", lambda: parse_request(body, data), offload=offload
        )
        inputs = model_inputs(parsed, metadata)
        outputs = await context.predict(version, inputs, metadata.check_outputs(parsed.outputs))
        answer, raw = await context.run_stage(
            version,
            "postprocess",
            lambda: _response(version, parsed, outputs),
            offload=offload,
        )
    return binary.response(answer, raw) if raw else json_response(answer)


async def _explain(request: Request, name: str, label: str | None) -> Response:
    context = ServingContext.of(request)
    size, body, data = await _read(request, context.max_body_bytes)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(label, key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "explain")
        metadata = version.runtime.metadata
        parsed = await context.run_stage(
            version,
            "preprocess",
            lambda: parse_request(body, data),
            offload=size > OFFLOAD_BYTES,
        )
        found = await context.explain(version, model_inputs(parsed, metadata), parsed.parameters)
        answer, raw = _response(version, parsed, explanation_tensors(found))
    return binary.response(answer, raw) if raw else json_response(answer)


async def _read(
    request: Request, limit: int
) -> tuple[int, dict[str, Any], binary.BinaryData | None]:
    """The body's size, its JSON object and the binary tensor data after it (if any)."""
    body, header_length = await read_body(request, limit)
    found, data = await binary.split(body, header_length)
    return len(body), found, data


def parse_request(body: dict[str, Any], data: binary.BinaryData | None = None) -> InferRequest:
    """A V2 inference request's parts, each input decoded and checked on its own.

    Args:
        body: The JSON request.
        data: The binary tensor data after it, for inputs sent so (None: a plain JSON
            request).

    Raises:
        InvalidInputError: A missing or malformed field, named.
    """
    request_id = body.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInputError(f"'id' must be a string, got {request_id!r}")
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidInputError(f"'parameters' must be an object, got {parameters!r}")
    binary_default, binary_outputs = binary.wanted(body, body.get("outputs"))
    parameters = {k: v for k, v in parameters.items() if k not in binary.PARAMETERS}
    raw = body.get("inputs")
    if not isinstance(raw, list) or not raw:
        raise InvalidInputError(
            "a V2 inference request needs 'inputs': a non-empty list of tensors"
        )
    inputs = []
    for i, tensor in enumerate(raw):
        where = f"inputs[{i}]"
        raw_data = data.take(tensor, where=where) if data is not None else None
        name, array = decode(tensor, where=where, raw=raw_data)
        inputs.append((name, tensor["datatype"], array))
    if data is not None:
        data.check_used()
    names = [n for n, _, _ in inputs]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"inputs name the same tensor twice: {names}")
    outputs = _requested_outputs(body.get("outputs"))
    return InferRequest(request_id, parameters, inputs, outputs, binary_default, binary_outputs)


def model_inputs(parsed: InferRequest, metadata: ModelMetadata) -> dict[str, np.ndarray]:
    """The request's inputs checked against the model's: names, datatypes and shapes.

    Raises:
        InvalidInputError: An input the model does not have, one it needs and did not get, or a
            datatype or shape it does not take.
    """
    if not metadata.inputs:  # a model that declares nothing takes what it is given
        return {name: array for name, _, array in parsed.inputs}
    declared = [i.name for i in metadata.inputs]
    given = {name: (datatype, array) for name, datatype, array in parsed.inputs}
    unknown = [n for n in given if n not in declared]
    missing = [n for n in declared if n not in given]
    if unknown or missing:
        said = [f"has no input {', '.join(repr(u) for u in unknown)}"] if unknown else []
        if missing:
            said.append(f"needs {', '.join(repr(m) for m in missing)}")
        raise InvalidInputError(f"the model {' and '.join(said)} (inputs: {', '.join(declared)})")
    return {
        spec.name: conform(given[spec.name][1], given[spec.name][0], spec)
        for spec in metadata.inputs
    }


def explanation_tensors(found: Explanation) -> dict[str, np.ndarray]:
    """An explanation as named output tensors."""
    tensors = {
        "predictions": np.asarray(found.predictions),
        "attributions": np.asarray(found.attributions),
    }
    if found.feature_names:
        tensors["feature_names"] = np.asarray(found.feature_names, dtype=object)
    if found.bias is not None:
        tensors["bias"] = np.asarray(found.bias)
    if found.targets is not None:
        tensors["targets"] = np.asarray(found.targets, dtype=np.int64)
    if found.deltas is not None:
        tensors["deltas"] = np.asarray(found.deltas, dtype=np.float64)
    return tensors


def _response(
    version: ModelVersion, parsed: InferRequest, outputs: dict[str, np.ndarray]
) -> tuple[dict[str, Any], list[bytes]]:
    """The JSON answer, and the binary data of the outputs answered so, in output order."""
    answer: dict[str, Any] = {"model_name": version.endpoint, "model_version": version.version}
    if parsed.id is not None:
        answer["id"] = parsed.id
    encoded, raw = [], []
    for name, array in outputs.items():
        if parsed.is_binary(name):
            found = np.asarray(array)
            raw.append(to_bytes(found))
            encoded.append(
                {
                    "name": name,
                    "datatype": datatype_of(found),
                    "shape": list(found.shape),
                    "parameters": {"binary_data_size": len(raw[-1])},
                }
            )
        else:
            encoded.append(encode(name, array))
    answer["outputs"] = encoded
    return answer, raw


def _requested_outputs(raw: Any) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
        isinstance(o, dict) and isinstance(o.get("name"), str) for o in raw
    ):
        raise InvalidInputError(
            f"'outputs' must be a list of objects with a 'name' string, got {raw!r}"[:300]
        )
    return [o["name"] for o in raw]
