"""Other people's clients against a real `headwater serve`: Triton's (`tritonclient[http]`)
with its defaults, binary tensors included, and its model configuration, statistics and
repository index calls; KServe's (`kserve.InferenceRESTClient`, both protocols): health,
readiness, V1 predict and explain, V2 infer. One server for the module.

`kserve` is installed without its dependencies by `make` (ADR 21): its pins would
downgrade pandas and psutil, and its client needs none of what they guard."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
xgb = pytest.importorskip("xgboost")
triton = pytest.importorskip("tritonclient.http")
kserve = pytest.importorskip("kserve")

import numpy as np  # noqa: E402
from test_serve_cli import FEATURES, save_booster, serving  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server of one booster, `churn`: its URL and the booster's file."""
    root = tmp_path_factory.mktemp("clients")
    (root / "cwd").mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(root / "home")}
    model = save_booster(root / "artifact")
    with serving(Cli(root / "home", root / "cwd", env), f"churn={model}") as (url, _):
        yield url, model / "model.ubj"


@pytest.fixture
def tritonclient(served: tuple[str, Path]) -> Iterator[Any]:
    """Triton's HTTP client of the module's server."""
    client = triton.InferenceServerClient(url=served[0].removeprefix("http://"))
    yield client
    client.close()


def test_tritonclient_infers_with_its_defaults(tritonclient: Any, served: tuple[str, Path]) -> None:
    client = tritonclient
    x = np.random.default_rng(4).normal(size=(3, 4)).astype(np.float32)
    tensor = triton.InferInput("input-0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)  # binary_data=True: the Triton binary extension
    named = client.infer("churn", [tensor], outputs=[triton.InferRequestedOutput("predict")])
    unnamed = client.infer("churn", [tensor], request_id="t2")  # every output, as binary
    expected = xgb.Booster(model_file=str(served[1])).predict(
        xgb.DMatrix(x, feature_names=FEATURES)
    )
    for result in (named, unnamed):
        np.testing.assert_array_equal(result.as_numpy("predict"), expected)
    response = unnamed.get_response()
    assert response["id"] == "t2" and response["model_version"] == "1"
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("churn")


def test_tritonclient_reads_config_stats_and_index(tritonclient: Any) -> None:
    client = tritonclient
    assert "binary_tensor_data" in client.get_server_metadata()["extensions"]
    config = client.get_model_config("churn")
    assert config["platform"] == "xgboost" and config["max_batch_size"] == 0
    assert config["input"] == [{"name": "input-0", "data_type": "TYPE_FP32", "dims": [-1, 4]}]
    x = np.zeros((1, 4), dtype=np.float32)
    tensor = triton.InferInput("input-0", [1, 4], "FP32")
    tensor.set_data_from_numpy(x)
    before = client.get_inference_statistics("churn")["model_stats"][0]["inference_count"]
    client.infer("churn", [tensor])
    [stat] = client.get_inference_statistics("churn", "1")["model_stats"]
    assert stat["name"] == "churn" and stat["inference_count"] == before + 1
    assert client.get_model_repository_index() == [
        {"name": "churn", "version": "1", "state": "READY", "reason": ""}
    ]


def kserve_call(protocol: str, method: str, *args: Any, **kwargs: Any) -> Any:
    """One call of KServe's async REST client (a fresh one each time, as a script would)."""

    async def call() -> Any:
        client = kserve.InferenceRESTClient(kserve.RESTConfig(protocol=protocol, retries=0))
        try:
            return await getattr(client, method)(*args, **kwargs)
        finally:
            await client.close()

    return asyncio.run(call())


def test_kserve_client_health_calls(served: tuple[str, Path]) -> None:
    url = served[0]
    assert kserve_call("v1", "is_server_live", url) is True  # GET / -> {"status": "alive"}
    assert kserve_call("v2", "is_server_live", url) is True
    assert kserve_call("v2", "is_server_ready", url) is True
    for protocol in ("v1", "v2"):
        assert kserve_call(protocol, "is_model_ready", url, "churn") is True


def test_kserve_client_v1_predict_and_explain(served: tuple[str, Path]) -> None:
    url, model = served
    x = np.random.default_rng(5).normal(size=(2, 4)).astype(np.float32)
    expected = xgb.Booster(model_file=str(model)).predict(xgb.DMatrix(x, feature_names=FEATURES))
    headers: dict[str, str] = {}
    answer = kserve_call(
        "v1", "infer", url, {"instances": x.tolist()}, "churn", response_headers=headers
    )
    np.testing.assert_allclose(answer["predictions"], expected, rtol=1e-6)
    assert headers["x-headwater-model-version"] == "1"
    explained = kserve_call("v1", "explain", url, "churn", {"instances": x.tolist()})
    assert len(explained["explanations"]) == 2


def test_kserve_client_v2_infer(served: tuple[str, Path]) -> None:
    url, model = served
    x = np.random.default_rng(6).normal(size=(3, 4)).astype(np.float32)
    tensor = kserve.InferInput("input-0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    request = kserve.InferRequest(model_name="churn", infer_inputs=[tensor], request_id="k1")
    answer = kserve_call("v2", "infer", url, request, "churn")
    expected = xgb.Booster(model_file=str(model)).predict(xgb.DMatrix(x, feature_names=FEATURES))
    [output] = answer.outputs
    np.testing.assert_array_equal(output.as_numpy(), expected)
    assert answer.id == "k1" and answer.model_name == "churn"
    with pytest.raises(Exception, match="400") as error:
        kserve_call("v2", "infer", url, {"inputs": "not a list"}, "churn")
    assert "inputs" in str(error.value.response.text)
