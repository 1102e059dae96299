"""The binary tensor data extension, with requests built as Triton's and KServe's clients
build them and answers read as they read them (a real server and client:
tests/integration/test_serve_clients.py)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from headwater.serving.app import create_app

from .helpers import FEATURES, client, rows

pytestmark = pytest.mark.anyio
triton = pytest.importorskip("tritonclient.http")


def _expected(path: str, x: np.ndarray) -> np.ndarray:
    import xgboost as xgb

    booster = xgb.Booster(model_file=str(Path(path) / "model.ubj"))
    found: np.ndarray = booster.predict(xgb.DMatrix(x, feature_names=FEATURES))
    return found


async def _triton_infer(
    app: Any, model: str, inputs: list[Any], outputs: list[Any] | None = None
) -> Any:
    """What `tritonclient.http.InferenceServerClient.infer` sends and reads, through the
    client's own code: `generate_request_body` is its `_get_inference_request`, and
    `parse_response_body` its `InferResult`, minus the HTTP connection (which is
    geventhttpclient's: the header goes as `Inference-Header-Content-Length`)."""
    body, json_size = triton.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="r1"
    )
    headers = {} if json_size is None else {"Inference-Header-Content-Length": str(json_size)}
    async with client(app) as c:
        answer = await c.post(f"/v2/models/{model}/infer", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    length = answer.headers.get("inference-header-content-length")
    result = triton.InferenceServerClient.parse_response_body(
        answer.content, header_length=None if length is None else int(length)
    )
    return answer, result


async def test_tritonclients_default_binary_request_and_answer(
    xgboost_model: Callable[..., str],
) -> None:
    path = xgboost_model()
    x = rows(3)
    tensor = triton.InferInput("input-0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)  # binary_data=True, the client's default
    # No outputs named: the client asks for all of them as binary (binary_data_output).
    answer, result = await _triton_infer(create_app([path]), "churn", [tensor])
    header = json.loads(answer.content[: int(answer.headers["inference-header-content-length"])])
    assert answer.headers["content-type"] == "application/octet-stream"
    assert header == {
        "model_name": "churn",
        "model_version": "1",
        "id": "r1",
        "outputs": [
            {
                "name": "predict",
                "datatype": "FP32",
                "shape": [3],
                "parameters": {"binary_data_size": 12},
            }
        ],
    }
    found = result.as_numpy("predict")
    assert found.dtype == np.float32
    np.testing.assert_array_equal(found, _expected(path, x))


async def test_binary_and_json_tensors_mix_by_output(handler_file: str) -> None:
    texts = np.array(["héllo", "", "ab"], dtype=object)
    tensor = triton.InferInput("text", [3], "BYTES")
    tensor.set_data_from_numpy(texts)  # 4-byte little-endian lengths, then UTF-8
    app = create_app([f"lengths={handler_file}:Lengths"])
    as_json = [triton.InferRequestedOutput("length", binary_data=False)]
    as_binary = [triton.InferRequestedOutput("length", binary_data=True)]
    plain, plain_result = await _triton_infer(app, "lengths", [tensor], as_json)
    raw, raw_result = await _triton_infer(app, "lengths", [tensor], as_binary)
    assert "inference-header-content-length" not in plain.headers
    assert plain.json()["outputs"][0]["data"] == [5, 0, 2]
    assert raw.content.endswith(np.array([5, 0, 2], dtype="<i8").tobytes())
    for result in (plain_result, raw_result):
        np.testing.assert_array_equal(result.as_numpy("length"), [5, 0, 2])


async def test_bytes_outputs_are_length_prefixed(handler_file: str) -> None:
    body = {
        "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 2], "data": [1, 2]}],
        "parameters": {"binary_data_output": True},
    }
    async with client(create_app([f"sums={handler_file}:Untyped"])) as c:
        answer = await c.post("/v2/models/sums/infer", json=body)
    length = int(answer.headers["inference-header-content-length"])
    [output] = json.loads(answer.content[:length])["outputs"]
    assert output["parameters"] == {"binary_data_size": 8}
    assert struct.unpack("<d", answer.content[length:]) == (3.0,)
    from headwater.serving.tensors import to_bytes

    strings = to_bytes(np.array(["é", b"\x00\xff"], dtype=object))
    assert strings == b"\x02\x00\x00\x00\xc3\xa9" + b"\x02\x00\x00\x00\x00\xff"


async def test_kserves_binary_request_and_answer(xgboost_model: Callable[..., str]) -> None:
    """The bytes `kserve.InferenceRESTClient.infer` sends for an `InferRequest` whose input was
    set with `set_data_from_numpy(x)` (binary_data=True by default): `InferRequest.to_rest`
    (kserve python/kserve/kserve/protocol/infer_type.py) writes orjson of {"id",
    "model_name", "inputs": [{"name", "shape", "datatype", "parameters":
    {"binary_data_size"}}]} then `x.tobytes()`, and `infer` (inference_client.py) adds
    `Inference-Header-Content-Length` and `content-type: application/octet-stream`. It reads
    the answer with `InferResponse.from_bytes(content, header or len(content))`."""
    path = xgboost_model()
    x = rows(2)
    header = {
        "id": "k1",
        "model_name": "churn",
        "inputs": [
            {
                "name": "input-0",
                "shape": [2, 4],
                "datatype": "FP32",
                "parameters": {"binary_data_size": x.nbytes},
            }
        ],
        "parameters": {"binary_data_output": True},
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    headers = {
        "inference-header-content-length": str(len(text)),
        "content-type": "application/octet-stream",
    }
    async with client(create_app([path])) as c:
        answer = await c.post("/v2/models/churn/infer", content=text + x.tobytes(), headers=headers)
    assert answer.status_code == 200, answer.text
    length = int(answer.headers["inference-header-content-length"])
    found = json.loads(answer.content[:length])
    # KServe's server answers "model_version" as a string too (InferResponse.to_rest); its
    # client's `from_bytes` drops the field, whichever server answers.
    assert found["id"] == "k1" and found["model_version"] == "1"
    [output] = found["outputs"]
    values = np.frombuffer(answer.content[length:], dtype="<f4")
    assert output["parameters"]["binary_data_size"] == values.nbytes
    np.testing.assert_array_equal(values, _expected(path, x))
