"""KServe V1 ("TF Serving style") REST: list, status, `:predict` and `:explain`.

    GET  /                           {"status": "alive"} (KServe's liveness, which its V1
                                     client's `is_server_live` reads)
    GET  /v1/models                  {"models": ["churn", ...]}
    GET  /v1/models/{name}           {"name": "churn", "ready": true}
    POST /v1/models/{name}:predict   {"instances": [...]}  ->  {"predictions": [...]}
    POST /v1/models/{name}:explain   {"instances": [...], "parameters"?: {...}}
                                     ->  {"predictions", "method", "feature_names",
                                          "explanations": [{"attributions", "bias"?, ...}]}

Instances are rows of the model's single input (`[[0.1, 2.0, ...], ...]`), or objects: keyed
by feature name for a tabular model that knows its features (missing or unknown features are
an error), else keyed by input name. `"inputs"` is taken for `"instances"`. A model with one
output predicts one value (or array) per instance; with several, an object per instance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from headwater.serving.context import ServingContext, request_key
from headwater.serving.errors import InvalidInputError
from headwater.serving.runtimes.base import Explanation, ModelMetadata
from headwater.serving.tensors import conform, infer_datatype, to_json
from headwater.serving.wire import OFFLOAD_BYTES, json_response, read_json

router = APIRouter()
PROTOCOL = "v1"


@router.get("/")
async def live(request: Request) -> Response:
    """`{"status": "alive"}` while the server answers at all."""
    return json_response({"status": "alive"})


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    """The names of the served models."""
    return json_response({"models": ServingContext.of(request).repository.names})


@router.get("/v1/models/{name}")
async def model_status(request: Request, name: str) -> Response:
    """`{"name", "ready": true}`; 404 for an unknown model, 503 if it has no version ready."""
    context = ServingContext.of(request)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "status")
        return json_response({"name": name, "ready": version.runtime.ready})


@router.post("/v1/models/{name}:predict")
async def predict(request: Request, name: str) -> Response:
    """Predictions for the instances."""
    context = ServingContext.of(request)
    body, size = await read_json(request, context.max_body_bytes)
    instances = _instances(body)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "predict")
        metadata = version.runtime.metadata
        offload = size > OFFLOAD_BYTES
        inputs = await context.run_stage(
            version, "preprocess", lambda: to_inputs(instances, metadata), offload=offload
        )
        outputs = await context.predict(version, inputs, metadata.check_outputs(None))
        predictions = await context.run_stage(
            version, "postprocess", lambda: to_predictions(outputs), offload=offload
        )
    return json_response({"predictions": predictions})


@router.post("/v1/models/{name}:explain")
async def explain(request: Request, name: str) -> Response:
    """Predictions and per-feature attributions for the instances."""
    context = ServingContext.of(request)
    body, size = await read_json(request, context.max_body_bytes)
    instances = _instances(body)
    options = body.get("parameters") or {}
    if not isinstance(options, dict):
        raise InvalidInputError(f"'parameters' must be an object, got {options!r}")
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "explain")
        metadata = version.runtime.metadata
        inputs = await context.run_stage(
            version,
            "preprocess",
            lambda: to_inputs(instances, metadata),
            offload=size > OFFLOAD_BYTES,
        )
        found = await context.explain(version, inputs, options)
    return json_response(explanation_json(found))


def to_inputs(instances: list[Any], metadata: ModelMetadata) -> dict[str, np.ndarray]:
    """V1 instances as the model's named input arrays (see the module docstring).

    Raises:
        InvalidInputError: Mixed rows and objects, ragged rows, missing or unknown keys, or
            values the model's inputs do not take.
    """
    objects = [isinstance(i, dict) for i in instances]
    if any(objects) and not all(objects):
        raise InvalidInputError("instances mix objects and rows: send all of one kind")
    if all(objects):
        if metadata.feature_names and len(metadata.inputs) == 1:
            return {metadata.inputs[0].name: _by_feature(instances, metadata)}
        return _by_input(instances, metadata)
    if len(metadata.inputs) > 1:
        names = ", ".join(i.name for i in metadata.inputs)
        raise InvalidInputError(
            f"the model takes several inputs ({names}): send each instance as an object "
            "keyed by input name"
        )
    name = metadata.inputs[0].name if metadata.inputs else "input-0"
    return {name: _array(instances, name, metadata)}


def to_predictions(outputs: dict[str, np.ndarray]) -> Any:
    """The V1 `predictions`: the single output's rows, or an object per row."""
    if len(outputs) == 1:
        return to_json(next(iter(outputs.values())))
    rows = {len(a) if a.ndim else -1 for a in outputs.values()}
    if len(rows) != 1 or -1 in rows:
        return {name: to_json(array) for name, array in outputs.items()}
    columns = {name: to_json(array) for name, array in outputs.items()}
    return [{name: column[i] for name, column in columns.items()} for i in range(rows.pop())]


def explanation_json(found: Explanation) -> dict[str, Any]:
    """The V1 `:explain` answer: predictions, method, feature names and one explanation per
    instance (attributions keyed by feature name when the names are known)."""
    names = found.feature_names
    explanations: list[dict[str, Any]] = []
    for i, row in enumerate(found.attributions):
        item: dict[str, Any] = {"attributions": _attributions(np.asarray(row), names)}
        if found.bias is not None:
            item["bias"] = to_json(np.asarray(found.bias[i]))
        if found.targets is not None:
            item["target"] = found.targets[i]
        if found.deltas is not None:
            item["delta"] = to_json(np.asarray(found.deltas[i], dtype=np.float64))
        explanations.append(item)
    return {
        "predictions": to_json(np.asarray(found.predictions)),
        "method": found.method,
        "feature_names": names,
        "explanations": explanations,
    }


def _attributions(row: np.ndarray, names: list[str] | None) -> Any:
    if not names or row.shape[-1:] != (len(names),) or row.ndim > 2:
        return to_json(row)
    if row.ndim == 1:
        return dict(zip(names, to_json(row), strict=True))
    # (classes, features): per feature, its attribution to each class
    return dict(zip(names, to_json(row.T), strict=True))


def _instances(body: dict[str, Any]) -> list[Any]:
    found = body.get("instances", body.get("inputs"))
    if found is None:
        raise InvalidInputError(
            f'a V1 request is {{"instances": [...]}}; this one has {sorted(body) or "no keys"}'
        )
    if not isinstance(found, list) or not found:
        raise InvalidInputError(f"'instances' must be a non-empty list, got {_short(found)}")
    return found


def _array(values: list[Any], name: str, metadata: ModelMetadata) -> np.ndarray:
    where = f"input {name!r}"
    try:
        array = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"{where} has ragged instances: every row must have the same length"
        ) from exc
    datatype = infer_datatype(array, where=where)
    if datatype == "BYTES":
        array = array.astype(object)
    spec = metadata.input(name)
    return conform(array, datatype, spec) if spec is not None else array


def _by_feature(instances: list[dict[str, Any]], metadata: ModelMetadata) -> np.ndarray:
    names = list(metadata.feature_names or ())
    known = set(names)
    rows = []
    for i, instance in enumerate(instances):
        missing = [n for n in names if n not in instance]
        unknown = sorted(set(instance) - known)
        if missing or unknown:
            said = []
            if missing:
                said.append(f"lacks {', '.join(repr(m) for m in missing[:10])}")
            if unknown:
                said.append(f"has unknown {', '.join(repr(u) for u in unknown[:10])}")
            raise InvalidInputError(
                f"instance {i} {' and '.join(said)} (the model's features: {', '.join(names[:50])})"
            )
        rows.append([instance[n] for n in names])
    return _array(rows, metadata.inputs[0].name, metadata)


def _by_input(instances: list[dict[str, Any]], metadata: ModelMetadata) -> dict[str, np.ndarray]:
    declared = [i.name for i in metadata.inputs]
    keys = declared or list(instances[0])
    for i, instance in enumerate(instances):
        if set(instance) != set(keys):
            raise InvalidInputError(
                f"instance {i} has keys {sorted(instance)}; the model takes {sorted(keys)}"
            )
    return {k: _array([instance[k] for instance in instances], k, metadata) for k in keys}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
