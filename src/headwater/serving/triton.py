"""Triton's V2 extensions that its client calls: model configuration, statistics, and the
repository index, answered from what Headwater knows.

    GET  /v2/models/{m}[/versions/{v}]/config  {"name", "platform", "backend",
                                                "max_batch_size": 0, "input": [...],
                                                "output": [...], "parameters"?}
    GET  /v2/models[/{m}[/versions/{v}]]/stats {"model_stats": [{"name", "version",
                                                "last_inference", "inference_count",
                                                "execution_count", "inference_stats", ...}]}
    POST /v2/repository/index                  [{"name", "version"?, "state", "reason"}]
                                               (body optional: {"ready": true} for the
                                               ready ones only)

The configuration is Triton's `ModelConfig` as JSON (triton-inference-server/common
`model_config.proto`): datatypes as `TYPE_FP32`..., BYTES as `TYPE_STRING`. Headwater's
models take any number of rows, so `max_batch_size` is 0 and `dims` keep the batch dimension
(-1), which is how Triton describes a model it does not batch itself; Headwater's own
batching (`--max-batch-size`, counted in requests) is in `parameters`.

Statistics are kept per worker process, since the server started, for each version: V1
`:predict` and V2 `infer` requests counted as Triton counts inferences (`success`, `fail`,
with their total time), and the stages timed as Triton's `compute_input` (decoding),
`compute_infer` (the model call, batching wait included) and `compute_output` (encoding).
Headwater counts requests where Triton counts rows: `inference_count` and
`execution_count` are both the successful requests. Queue and cache times are 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from headwater.serving.batching import BatchingPredictor
from headwater.serving.context import ServingContext, request_key
from headwater.serving.endpoint import ModelEndpoint, ModelVersion
from headwater.serving.errors import InvalidInputError
from headwater.serving.observe import ServingHooks
from headwater.serving.wire import json_response, parse_json, read_body

router = APIRouter()
PROTOCOL = "v2"
#: The `GET /v2` extensions this module serves, by Triton's names.
EXTENSIONS = ("model_configuration", "statistics")
#: Headwater's stages by Triton's names for them.
_STAGES = {
    "preprocess": "compute_input",
    "predict": "compute_infer",
    "postprocess": "compute_output",
}
_VERBS = frozenset({"infer", "predict"})
_STATS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass
class _Counts:
    """One version's statistics: per Triton statistic, [count, nanoseconds]."""

    last_inference_ms: int = 0
    durations: dict[str, list[int]] = field(
        default_factory=lambda: {name: [0, 0] for name in (*_STATS, "cache_hit", "cache_miss")}
    )

    def add(self, name: str, seconds: float) -> None:
        found = self.durations[name]
        found[0] += 1
        found[1] += int(seconds * 1e9)


class StatisticsHooks(ServingHooks):
    """Counts inferences and times their stages per model version, for `/stats`.

    Only versions that were served count (a request names a model that exists before it is
    marked), so the table grows with the versions loaded, never with what clients send.
    """

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], _Counts] = {}

    def after_request(
        self,
        *,
        endpoint: str | None,
        version: str | None,
        protocol: str | None,
        verb: str | None,
        status: int,
        duration_s: float,
    ) -> None:
        """Count an inference request as a success or a failure."""
        if endpoint is None or version is None or verb not in _VERBS:
            return
        counts = self._of(endpoint, version)
        counts.add("success" if status < 400 else "fail", duration_s)
        if status < 400:
            counts.last_inference_ms = int(time.time() * 1000)

    def after_stage(self, *, endpoint: str, version: str, stage: str, duration_s: float) -> None:
        """Time the stage under Triton's name for it."""
        name = _STAGES.get(stage)
        if name is not None:
            self._of(endpoint, version).add(name, duration_s)

    def model_stat(self, version: ModelVersion) -> dict[str, Any]:
        """Triton's `$model_stat` for one loaded version."""
        counts = self.counts.get((version.endpoint, version.version)) or _Counts()
        served = counts.durations["success"][0]
        return {
            "name": version.endpoint,
            "version": version.version,
            "last_inference": counts.last_inference_ms,
            "inference_count": served,
            "execution_count": served,
            "inference_stats": {
                name: {"count": count, "ns": ns} for name, (count, ns) in counts.durations.items()
            },
            "response_stats": {},
            "batch_stats": [],
            "memory_usage": [],
        }

    def _of(self, endpoint: str, version: str) -> _Counts:
        found = self.counts.get((endpoint, version))
        if found is None:
            found = self.counts[(endpoint, version)] = _Counts()
        return found


@router.get("/v2/models/stats")
async def all_stats(request: Request) -> Response:
    """Statistics of every loaded version of every model."""
    context = ServingContext.of(request)
    versions = [v for e in context.repository for v in e.state.versions.values()]
    return _stats(context, versions)


@router.get("/v2/models/{name}/stats")
async def model_stats(request: Request, name: str) -> Response:
    """Statistics of every loaded version of the model."""
    context = ServingContext.of(request)
    endpoint = context.repository.endpoint(name)
    return _stats(context, endpoint.state.versions.values())


@router.get("/v2/models/{name}/versions/{version}/stats")
async def version_stats(request: Request, name: str, version: str) -> Response:
    """Statistics of one loaded version."""
    context = ServingContext.of(request)
    async with context.repository.endpoint(name).serving(version) as chosen:
        return _stats(context, [chosen])


@router.get("/v2/models/{name}/config")
async def model_config(request: Request, name: str) -> Response:
    """The configuration of the version the traffic policy picks."""
    return await _config(request, name, None)


@router.get("/v2/models/{name}/versions/{version}/config")
async def version_config(request: Request, name: str, version: str) -> Response:
    """One version's configuration."""
    return await _config(request, name, version)


@router.post("/v2/repository/index")
async def repository_index(request: Request) -> Response:
    """Every served model's loaded versions, READY; a model with none is UNAVAILABLE."""
    context = ServingContext.of(request)
    body, _ = await read_body(request, context.max_body_bytes)
    wanted = parse_json(body) if body.strip() else {}
    ready_only = wanted.get("ready", False) if isinstance(wanted, dict) else None
    if not isinstance(ready_only, bool):
        raise InvalidInputError(
            f'a repository index request is {{"ready"?: true|false}}, got {body[:200]!r}'
        )
    return json_response(list(_index(context.repository, ready_only=ready_only)))


def config(endpoint: ModelEndpoint, version: ModelVersion) -> dict[str, Any]:
    """Triton's `ModelConfig` JSON for `version` (see the module docstring)."""
    metadata = version.runtime.metadata
    answer: dict[str, Any] = {
        "name": endpoint.name,
        "platform": metadata.platform,
        "backend": metadata.platform,
        "max_batch_size": 0,
        "input": [_tensor(t.name, t.datatype, t.shape) for t in metadata.inputs],
        "output": [_tensor(t.name, t.datatype, t.shape) for t in metadata.outputs],
    }
    predictor = version.predictor
    if isinstance(predictor, BatchingPredictor):
        answer["parameters"] = {
            "headwater.max_batch_size": {"string_value": str(predictor.max_batch_size)},
            "headwater.max_latency_ms": {"string_value": f"{predictor.max_latency_ms:g}"},
        }
    return answer


async def _config(request: Request, name: str, label: str | None) -> Response:
    context = ServingContext.of(request)
    endpoint = context.repository.endpoint(name)
    async with endpoint.serving(label, key=request_key(request)) as version:
        context.mark(request, name, version.version, PROTOCOL, "config")
        return json_response(config(endpoint, version))


def _stats(context: ServingContext, versions: Iterable[ModelVersion]) -> Response:
    hooks = next((h for h in context.hooks if isinstance(h, StatisticsHooks)), None)
    found = hooks or StatisticsHooks()  # an app built without it has nothing counted
    return json_response({"model_stats": [found.model_stat(v) for v in versions]})


def _index(repository: Iterable[ModelEndpoint], *, ready_only: bool) -> Iterable[dict[str, Any]]:
    for endpoint in repository:
        versions = endpoint.state.versions
        for label in versions:
            yield {"name": endpoint.name, "version": label, "state": "READY", "reason": ""}
        if not versions and not ready_only:
            yield {"name": endpoint.name, "state": "UNAVAILABLE", "reason": "no version loaded"}


def _tensor(name: str, datatype: str, shape: tuple[int, ...]) -> dict[str, Any]:
    kind = "STRING" if datatype == "BYTES" else datatype
    return {"name": name, "data_type": f"TYPE_{kind}", "dims": list(shape)}


__all__ = ["EXTENSIONS", "StatisticsHooks", "config", "router"]
