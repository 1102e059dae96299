"""Every way a request can be wrong gets the protocols' `{"error": ...}` with 4xx/5xx, never
a bare 500, a traceback or FastAPI's 422."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from headwater.serving.app import create_app
from headwater.serving.endpoint import ModelEndpoint
from headwater.serving.repository import ModelRepository

from .helpers import client, rows, v2_input

pytestmark = pytest.mark.anyio
VERSION = "x-headwater-model-version"
GOOD = v2_input(rows(1))


def _error(answer: Any, status: int, *fragments: str) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert list(body) == ["error"] and isinstance(body["error"], str), body
    for fragment in fragments:
        assert fragment in body["error"], body["error"]
    return str(body["error"])


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        (b"{not json", ["malformed JSON", "line 1 column 2"]),
        (b"", ["no body"]),
        (b"[1, 2]", ["must be a JSON object", "array"]),
        (b"\xff\xfe", ["not UTF-8"]),
        (b"{}", ["needs 'inputs'"]),
        (b'{"inputs": {}}', ["needs 'inputs'"]),
        (b'{"inputs": [3]}', ["inputs[0] must be an object"]),
        (b'{"inputs": [{"datatype": "FP32", "shape": [1], "data": [1]}]}', ["needs a 'name'"]),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FLOAT", "shape": [1, 4], "data": []}]}',
            ["datatype 'FLOAT'", "FP32"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4], "data": []}]}',
            ["shape [-1, 4]", "integers >= 0"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4]}]}',
            ["has no 'data'"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3]}]}',
            ["3 values", "holds 4"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [[1, 2], [3, 4]]}]}',
            ["nested as [2, 2]", "shape is [1, 4]"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [2, 2], '
            b'"data": [[1, 2], [3]]}]}',
            ["ragged"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": ["a", "b", "c", "d"]}]}',
            ["is FP32", "strings"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "INT64", "shape": [1, 4], '
            b'"data": [1.5, 2, 3, 4]}]}',
            ["is INT64", "floating-point"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "INT8", "shape": [1, 4], '
            b'"data": [1, 2, 3, 400]}]}',
            ["400", "int8"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "BOOL", "shape": [1, 4], '
            b'"data": [1, 0, 1, 0]}]}',
            ["is BOOL", "integers"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "BYTES", "shape": [1, 4], '
            b'"data": ["a", "b", "c", "d"]}]}',
            ["datatype BYTES", "takes FP32"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 3], '
            b'"data": [1, 2, 3]}]}',
            ["shape [1, 3]", "takes [-1, 4]"],
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}]}',
            ["no input 'x'", "needs 'input-0'"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}, {"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}]}',
            ["same tensor twice"],
        ),
        (
            b'{"id": 7, "inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}]}',
            ["'id' must be a string"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}], "outputs": [{"name": "proba"}]}',
            ["no output 'proba'", "outputs: predict"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}], "outputs": ["predict"]}',
            ["'outputs' must be a list of objects"],
        ),
        (
            b'{"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4], '
            b'"data": [1, 2, 3, 4]}], "parameters": [1]}',
            ["'parameters' must be an object"],
        ),
    ],
    ids=[
        "malformed-json",
        "empty-body",
        "not-an-object",
        "not-utf8",
        "no-inputs",
        "inputs-not-a-list",
        "tensor-not-an-object",
        "no-name",
        "unknown-datatype",
        "negative-dimension",
        "no-data",
        "count-mismatch",
        "nesting-mismatch",
        "ragged",
        "strings-as-fp32",
        "floats-as-int64",
        "int8-overflow",
        "numbers-as-bool",
        "bytes-for-a-float-input",
        "wrong-shape",
        "unknown-input",
        "duplicate-input",
        "id-not-a-string",
        "unknown-output",
        "outputs-not-objects",
        "parameters-not-an-object",
    ],
)
async def test_bad_v2_requests_are_400(
    xgboost_model: Callable[..., str], body: bytes, fragments: list[str]
) -> None:
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.post(
            "/v2/models/churn/infer", content=body, headers={"content-type": "application/json"}
        )
    _error(answer, 400, *fragments)


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ({"rows": [[1, 2, 3, 4]]}, ['{"instances": [...]}', "rows"]),
        ({"instances": []}, ["non-empty list"]),
        ({"instances": [[1, 2, 3, 4], [1, 2]]}, ["ragged"]),
        ({"instances": [[1, 2, 3, 4], {"age": 1}]}, ["mix objects and rows"]),
        ({"instances": [{"age": 1, "income": 2, "tenure": 3}]}, ["lacks 'visits'"]),
        (
            {"instances": [{"age": 1, "income": 2, "tenure": 3, "visits": 4, "x": 0}]},
            ["unknown 'x'"],
        ),
        ({"instances": [["a", "b", "c", "d"]]}, ["datatype BYTES", "takes FP32"]),
        ({"instances": [[1, None, 3, 4]]}, ["mixed values"]),
        ({"instances": [[1, 2, 3]]}, ["shape [1, 3]"]),
    ],
    ids=[
        "no-instances",
        "empty",
        "ragged",
        "mixed",
        "missing-feature",
        "unknown-feature",
        "strings",
        "null",
        "wrong-width",
    ],
)
async def test_bad_v1_requests_are_400(
    xgboost_model: Callable[..., str], body: dict[str, Any], fragments: list[str]
) -> None:
    async with client(create_app([xgboost_model()])) as c:
        predicted = await c.post("/v1/models/churn:predict", json=body)
        explained = await c.post("/v1/models/churn:explain", json=body)
    _error(predicted, 400, *fragments)
    _error(explained, 400, *fragments)


@pytest.mark.parametrize(
    ("method", "path", "fragments"),
    [
        ("GET", "/v1/models/nope", ["no model named 'nope'", "models: churn"]),
        ("POST", "/v1/models/nope:predict", ["no model named 'nope'"]),
        ("POST", "/v1/models/nope:explain", ["no model named 'nope'"]),
        ("GET", "/v2/models/nope", ["no model named 'nope'"]),
        ("GET", "/v2/models/nope/ready", ["no model named 'nope'"]),
        ("POST", "/v2/models/nope/infer", ["no model named 'nope'"]),
        ("GET", "/v2/models/churn/versions/7", ["no version '7'", "loaded versions: 1"]),
        ("GET", "/v2/models/churn/versions/7/ready", ["no version '7'"]),
        ("POST", "/v2/models/churn/versions/7/infer", ["no version '7'"]),
        ("POST", "/v2/models/churn/versions/7/explain", ["no version '7'"]),
        ("GET", "/v3/models", ["no route GET /v3/models"]),
        ("POST", "/v2/models/churn/train", ["no route POST /v2/models/churn/train"]),
    ],
)
async def test_unknown_models_versions_and_routes_are_404(
    xgboost_model: Callable[..., str], method: str, path: str, fragments: list[str]
) -> None:
    body = {"inputs": [GOOD], "instances": [[1, 2, 3, 4]]}
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.request(method, path, json=body if method == "POST" else None)
    _error(answer, 404, *fragments)


async def test_a_method_a_route_does_not_take_is_405(xgboost_model: Callable[..., str]) -> None:
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.delete("/v2/models/churn")
    _error(answer, 405, "DELETE /v2/models/churn")
    assert answer.headers["allow"] == "GET"


async def test_errors_after_a_version_is_chosen_name_it(xgboost_model: Callable[..., str]) -> None:
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.post("/v1/models/churn:predict", json={"instances": [[1, 2]]})
    _error(answer, 400)
    assert answer.headers[VERSION] == "1"


async def test_a_body_declared_too_large_is_413(xgboost_model: Callable[..., str]) -> None:
    app = create_app([xgboost_model()], max_body_bytes=1000)
    big = {"inputs": [v2_input(rows(40))]}
    async with client(app) as c:
        answer = await c.post("/v2/models/churn/infer", json=big)
        small = await c.post("/v2/models/churn/infer", json={"inputs": [GOOD]})
    _error(answer, 413, "at most 1000 bytes", "--max-body-mb")
    assert small.status_code == 200


async def test_a_streamed_body_too_large_is_413(xgboost_model: Callable[..., str]) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"inputs": ['
        for _ in range(100):
            yield b" " * 100  # no content-length: counted as it arrives

    app = create_app([xgboost_model()], max_body_bytes=1000)
    async with client(app) as c:
        answer = await c.post("/v2/models/churn/infer", content=chunks())
    _error(answer, 413, "the body is more than", "at most 1000 bytes")


def _binary(header: dict[str, Any], data: bytes, length: int | None = None) -> dict[str, Any]:
    """A binary-extension request: `header` as JSON, then `data`; its header length given
    (default: the JSON's)."""
    text = json.dumps(header).encode()
    size = len(text) if length is None else length
    return {"content": text + data, "headers": {"inference-header-content-length": str(size)}}


SIZED = {**GOOD, "parameters": {"binary_data_size": 16}}
del SIZED["data"]
FOUR = np.ones(4, dtype="<f4").tobytes()


@pytest.mark.parametrize(
    ("path", "request_", "fragments"),
    [
        ("/v2/models/churn/infer", _binary({"inputs": [SIZED]}, FOUR[:8]), ["only 8 bytes"]),
        ("/v2/models/churn/infer", _binary({"inputs": [SIZED]}, FOUR * 2), ["16 bytes", "past"]),
        ("/v2/models/churn/infer", {"json": {"inputs": [SIZED]}}, ["no Inference-Header"]),
        ("/v2/models/churn/infer", _binary({"inputs": [SIZED]}, FOUR, 0), ["raw binary"]),
        ("/v2/models/churn/infer", _binary({"inputs": [SIZED]}, FOUR, 9999), ["the length"]),
        (
            "/v2/models/churn/infer",
            _binary({"inputs": [{**SIZED, "parameters": {"binary_data_size": "16"}}]}, FOUR),
            ["binary_data_size '16'"],
        ),
        (
            "/v2/models/churn/infer",
            _binary({"inputs": [{**SIZED, "datatype": "FP64"}]}, FOUR),
            ["16 bytes of binary data", "takes 32"],
        ),
        (
            "/v2/models/churn/infer",
            _binary({"inputs": [SIZED], "parameters": {"binary_data_output": 1}}, FOUR),
            ["binary_data_output must be true or false"],
        ),
        ("/v1/models/churn:predict", _binary({"instances": [[1, 2, 3, 4]]}, b""), ["V2"]),
    ],
    ids=[
        "short",
        "left-over",
        "no-header",
        "raw-request",
        "header-past-body",
        "size-not-int",
        "size-not-shape",
        "flag-not-bool",
        "v1",
    ],
)
async def test_malformed_binary_tensor_requests_say_what_is_wrong(
    xgboost_model: Callable[..., str],
    path: str,
    request_: dict[str, Any],
    fragments: list[str],
) -> None:
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.post(path, **request_)
    _error(answer, 400, *fragments)


async def test_a_model_rejecting_its_input_is_400_and_a_crash_is_a_json_500(
    handler_file: str,
) -> None:
    async with client(create_app([f"lengths={handler_file}:Lengths"])) as c:
        rejected = await c.post("/v1/models/lengths:predict", json={"instances": ["reject"]})
        crashed = await c.post("/v1/models/lengths:predict", json={"instances": ["boom"]})
        after = await c.post("/v1/models/lengths:predict", json={"instances": ["fine"]})
    _error(rejected, 400, "rejected the input", "ValueError: texts must not say reject")
    _error(crashed, 500, "internal error: ZeroDivisionError: boom")
    assert crashed.headers[VERSION] == "1"
    assert after.status_code == 200  # the server goes on


async def test_explaining_a_model_without_an_explainer_is_501(
    sklearn_model: Callable[..., str],
) -> None:
    async with client(create_app([sklearn_model()])) as c:
        v1 = await c.post("/v1/models/iris:explain", json={"instances": rows(1).tolist()})
        v2 = await c.post(
            "/v2/models/iris/explain", json={"inputs": [v2_input(rows(1), datatype="FP64")]}
        )
    _error(v1, 501, "has no explainer")
    _error(v2, 501, "has no explainer")


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ({"parameters": {"n_steps": 0}}, ["n_steps"]),
        ({"parameters": {"method": "lime"}}, ["unknown explanation method 'lime'"]),
        ({"parameters": {"target": 9}}, ["target 9"]),
        ({"parameters": {"baseline": "zero"}}, ["'baseline' must be a number"]),
        ({"parameters": {"steps": 3}}, ["no parameter 'steps'", "n_steps"]),
        ({"parameters": 3}, ["'parameters' must be an object"]),
    ],
    ids=["n-steps", "method", "target", "baseline", "unknown", "not-an-object"],
)
async def test_bad_explanation_options_are_400(
    torch_model: Callable[..., str], body: dict[str, Any], fragments: list[str]
) -> None:
    pytest.importorskip("captum")
    pytest.importorskip(
        "headwater.models.torch_explain",
        reason="the PyTorch issue's Captum explain is not in this tree yet",
    )
    async with client(create_app([f"digits={torch_model()}"])) as c:
        answer = await c.post(
            "/v1/models/digits:explain", json={"instances": rows(1).tolist(), **body}
        )
    _error(answer, 400, *fragments)


async def test_xgboost_explanations_take_no_options(xgboost_model: Callable[..., str]) -> None:
    body = {"instances": rows(1).tolist(), "parameters": {"method": "occlusion"}}
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.post("/v1/models/churn:explain", json=body)
    _error(answer, 400, "takes no parameter 'method'")


async def test_a_model_with_no_version_loaded_is_503() -> None:
    app = create_app(ModelRepository([ModelEndpoint("empty")]))
    async with client(app) as c:
        ready = await c.get("/v2/health/ready")
        model_ready = await c.get("/v2/models/empty/ready")
        status = await c.get("/v1/models/empty")
        predicted = await c.post("/v1/models/empty:predict", json={"instances": [[1]]})
        live = await c.get("/v2/health/live")
    _error(ready, 503, "no version loaded for empty")
    for answer in (model_ready, status, predicted):
        _error(answer, 503, "has no version ready")
    assert live.status_code == 200
