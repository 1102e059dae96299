"""Open Inference Protocol (V2) conformance: health, metadata, typed `infer`, `explain`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from headwater.serving.app import create_app

from .helpers import FEATURES, client, rows, v2_input

pytestmark = pytest.mark.anyio
VERSION = "x-headwater-model-version"


async def test_server_metadata_declares_its_extensions(
    xgboost_model: Callable[..., str],
) -> None:
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.get("/v2")
    assert answer.status_code == 200
    found = answer.json()
    assert found["name"] == "headwater" and isinstance(found["version"], str)
    assert found["extensions"] == [
        "explain",
        "model_configuration",
        "statistics",
        "binary_tensor_data",
    ]


# KServe's server answers these bodies (kserve/kserve python/kserve/kserve/protocol/rest/
# v2_endpoints.py `live`, `ready`, `model_ready`; server.py routes `/` to `dataplane.live`),
# and its client reads them (inference_client.py `InferenceRESTClient.is_server_live`:
# `response.json().get("live")`, or for V1 `response.json().get("status").lower() ==
# "alive"` from `GET /`; `is_server_ready`: `.get("ready")`). The spec's empty body made
# both clients' calls fail with a JSON decode error.
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v2/health/live", {"live": True}),
        ("/v2/health/ready", {"ready": True}),
        ("/v2/models/churn/ready", {"name": "churn", "ready": True}),
        ("/v2/models/churn/versions/1/ready", {"name": "churn", "ready": True}),
        ("/", {"status": "alive"}),
    ],
    ids=["live", "ready", "model-ready", "version-ready", "v1-live"],
)
async def test_health_answers_kserves_bodies(
    xgboost_model: Callable[..., str], path: str, body: dict[str, Any]
) -> None:
    async with client(create_app([xgboost_model()], token="s3cret")) as c:
        answer = await c.get(path, headers={"authorization": "Bearer s3cret"})
        anonymous = await c.get(path)
    assert answer.status_code == 200 and answer.json() == body
    assert answer.headers["content-type"] == "application/json"
    probe = path in ("/", "/v2/health/live", "/v2/health/ready")
    assert anonymous.status_code == (200 if probe else 401)


def _expected_metadata(kind: str) -> dict[str, Any]:
    return {
        "xgboost": {
            "platform": "xgboost",
            "inputs": [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "predict", "datatype": "FP32", "shape": [-1]}],
        },
        "sklearn": {
            "platform": "sklearn",
            "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [-1, 4]}],
            "outputs": [
                {"name": "predict", "datatype": "BYTES", "shape": [-1]},
                {"name": "predict_proba", "datatype": "FP64", "shape": [-1, 2]},
                {"name": "decision_function", "datatype": "FP64", "shape": [-1]},
            ],
        },
        "torch": {
            "platform": "pytorch",
            "inputs": [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "output-0", "datatype": "FP32", "shape": [-1, 3]}],
        },
        "custom": {
            "platform": "custom",
            "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
            "outputs": [{"name": "length", "datatype": "INT64", "shape": [-1]}],
        },
    }[kind]


@pytest.fixture
def any_model(
    request: pytest.FixtureRequest,
    xgboost_model: Callable[..., str],
    handler_file: str,
) -> str:
    kind = request.param
    if kind == "xgboost":
        return f"m={xgboost_model()}"
    if kind == "sklearn":
        return f"m={request.getfixturevalue('sklearn_model')()}"
    if kind == "torch":
        return f"m={request.getfixturevalue('torch_model')()}"
    return f"m={handler_file}:Lengths"


@pytest.mark.parametrize("any_model", ["xgboost", "sklearn", "torch", "custom"], indirect=True)
async def test_model_metadata_names_inputs_and_outputs(any_model: str) -> None:
    app = create_app([any_model])
    async with client(app) as c:
        plain = await c.get("/v2/models/m")
        versioned = await c.get("/v2/models/m/versions/1")
    assert plain.status_code == 200, plain.text
    assert plain.json() == versioned.json()
    found = plain.json()
    kind = {"xgboost": "xgboost", "sklearn": "sklearn", "pytorch": "torch", "custom": "custom"}[
        found["platform"]
    ]
    assert found == {"name": "m", "versions": ["1"], **_expected_metadata(kind)}
    assert plain.headers[VERSION] == "1"


async def test_infer_echoes_the_id_and_names_the_version(
    xgboost_model: Callable[..., str],
) -> None:
    import xgboost as xgb

    path = xgboost_model()
    x = rows(3)
    booster = xgb.Booster(model_file=str(Path(path) / "model.ubj"))
    expected = booster.predict(xgb.DMatrix(x, feature_names=FEATURES))
    body = {"id": "req-7", "inputs": [v2_input(x)]}
    async with client(create_app([path])) as c:
        answer = await c.post("/v2/models/churn/infer", json=body)
        anonymous = await c.post("/v2/models/churn/infer", json={"inputs": [v2_input(x)]})
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["model_name"] == "churn" and found["model_version"] == "1"
    assert found["id"] == "req-7" and "id" not in anonymous.json()
    [output] = found["outputs"]
    assert output["name"] == "predict" and output["datatype"] == "FP32"
    assert output["shape"] == [3]
    np.testing.assert_allclose(output["data"], expected, rtol=1e-6)
    assert answer.headers[VERSION] == "1"


@pytest.mark.parametrize(
    ("data", "datatype"),
    [
        (rows(2).tolist(), "FP32"),  # nested as the shape says
        (rows(2).astype(np.float64).reshape(-1).tolist(), "FP64"),  # converts to FP32
        ([[1, 0, 2, 3], [0, 1, 1, 1]], "INT64"),  # integers into a float input
        ([[1, 0, 2, 3], [0, 1, 1, 1]], "UINT8"),
    ],
    ids=["nested", "fp64", "int64", "uint8"],
)
async def test_numbers_of_any_numeric_datatype_feed_a_float_input(
    xgboost_model: Callable[..., str], data: list[Any], datatype: str
) -> None:
    tensor = {"name": "input-0", "datatype": datatype, "shape": [2, 4], "data": data}
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.post("/v2/models/churn/infer", json={"inputs": [tensor]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["shape"] == [2]


async def test_requested_outputs_are_the_ones_returned(sklearn_model: Callable[..., str]) -> None:
    import joblib

    path = sklearn_model()
    x = rows(3, seed=4).astype(np.float64)
    model = joblib.load(path)
    body = {"inputs": [v2_input(x, datatype="FP64")], "outputs": [{"name": "predict_proba"}]}
    both = {**body, "outputs": [{"name": "predict"}, {"name": "predict_proba"}]}
    async with client(create_app([path])) as c:
        probabilities = (await c.post("/v2/models/iris/infer", json=body)).json()
        default = (await c.post("/v2/models/iris/infer", json={"inputs": body["inputs"]})).json()
        two = (await c.post("/v2/models/iris/infer", json=both)).json()
    [proba] = probabilities["outputs"]
    assert proba["name"] == "predict_proba" and proba["shape"] == [3, 2]
    np.testing.assert_allclose(proba["data"], model.predict_proba(x).reshape(-1))
    assert [o["name"] for o in default["outputs"]] == ["predict"]
    assert default["outputs"][0]["datatype"] == "BYTES"
    assert default["outputs"][0]["data"] == model.predict(x).tolist()
    assert [o["name"] for o in two["outputs"]] == ["predict", "predict_proba"]


async def test_bytes_in_int64_out_through_a_handler(handler_file: str) -> None:
    tensor = {"name": "text", "datatype": "BYTES", "shape": [3], "data": ["a", "bb", "ccc"]}
    async with client(create_app([f"lengths={handler_file}:Lengths"])) as c:
        answer = await c.post("/v2/models/lengths/infer", json={"inputs": [tensor]})
    assert answer.json()["outputs"] == [
        {"name": "length", "datatype": "INT64", "shape": [3], "data": [1, 2, 3]}
    ]


async def test_bool_and_undeclared_inputs_pass_through(handler_file: str) -> None:
    tensor = {
        "name": "flags",
        "datatype": "BOOL",
        "shape": [2, 2],
        "data": [True, True, False, True],
    }
    async with client(create_app([f"sums={handler_file}:Untyped"])) as c:
        answer = await c.post("/v2/models/sums/infer", json={"inputs": [tensor]})
    assert answer.status_code == 200, answer.text
    [output] = answer.json()["outputs"]
    assert output["datatype"] == "FP64" and output["data"] == [2.0, 1.0]


async def test_versioned_routes_serve_that_version(xgboost_model: Callable[..., str]) -> None:
    body = {"inputs": [v2_input(rows(1))]}
    async with client(create_app([xgboost_model()])) as c:
        infer = await c.post("/v2/models/churn/versions/1/infer", json=body)
        ready = await c.get("/v2/models/churn/versions/1/ready")
    assert infer.status_code == 200 and infer.json()["model_version"] == "1"
    assert ready.status_code == 200 and ready.json() == {"name": "churn", "ready": True}
    assert infer.headers[VERSION] == ready.headers[VERSION] == "1"


async def test_explain_extension_answers_with_tensors(xgboost_model: Callable[..., str]) -> None:
    x = rows(2)
    body = {"id": "e1", "inputs": [v2_input(x)]}
    async with client(create_app([xgboost_model()])) as c:
        answer = await c.post("/v2/models/churn/explain", json=body)
        versioned = await c.post("/v2/models/churn/versions/1/explain", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == versioned.json()
    found = answer.json()
    assert found["id"] == "e1" and found["model_version"] == "1"
    outputs = {o["name"]: o for o in found["outputs"]}
    assert list(outputs) == ["predictions", "attributions", "feature_names", "bias"]
    assert outputs["attributions"]["shape"] == [2, 4]
    assert outputs["feature_names"] == {
        "name": "feature_names",
        "datatype": "BYTES",
        "shape": [4],
        "data": FEATURES,
    }
    assert outputs["bias"]["shape"] == [2] and outputs["predictions"]["shape"] == [2]
