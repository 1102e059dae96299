"""KServe V1 conformance: list, status, `:predict` and `:explain` for every kind of model."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from headwater.serving.app import create_app

from .helpers import FEATURES, client, rows

pytestmark = pytest.mark.anyio
VERSION = "x-headwater-model-version"


async def test_list_and_status_name_every_model(
    xgboost_model: Callable[..., str], sklearn_model: Callable[..., str]
) -> None:
    app = create_app([f"churn={xgboost_model()}", f"iris={sklearn_model()}"])
    async with client(app) as c:
        listed = await c.get("/v1/models")
        status = await c.get("/v1/models/iris")
    assert listed.status_code == 200 and listed.json() == {"models": ["churn", "iris"]}
    assert status.status_code == 200 and status.json() == {"name": "iris", "ready": True}
    assert status.headers[VERSION] == "1"
    assert VERSION not in listed.headers  # no model served that one


async def test_xgboost_predictions_are_the_boosters(xgboost_model: Callable[..., str]) -> None:
    import xgboost as xgb

    path = xgboost_model()
    x = rows(3)
    booster = xgb.Booster(model_file=str(Path(path) / "model.ubj"))
    expected = booster.predict(xgb.DMatrix(x, feature_names=FEATURES))
    by_feature = [dict(zip(FEATURES, map(float, row), strict=True)) for row in x]
    async with client(create_app([path])) as c:
        as_rows = await c.post("/v1/models/churn:predict", json={"instances": x.tolist()})
        as_objects = await c.post("/v1/models/churn:predict", json={"instances": by_feature})
        as_inputs = await c.post("/v1/models/churn:predict", json={"inputs": x.tolist()})
    for answer in (as_rows, as_objects, as_inputs):
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        np.testing.assert_allclose(answer.json()["predictions"], expected, rtol=1e-6)


async def test_sklearn_predicts_its_labels(sklearn_model: Callable[..., str]) -> None:
    import joblib

    path = sklearn_model()
    x = rows(4, seed=3)
    expected = joblib.load(path).predict(x).tolist()
    async with client(create_app([path])) as c:
        answer = await c.post("/v1/models/iris:predict", json={"instances": x.tolist()})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": expected}
    assert set(expected) <= {"yes", "no"}


@pytest.mark.parametrize("form", ["artifact", "torchscript"], ids=["state-dict", "torchscript"])
async def test_torch_predicts_the_modules_scores(
    torch_model: Callable[..., str], form: str
) -> None:
    import torch

    from headwater.models import torch_file

    path = torch_model()
    target = path if form == "artifact" else str(Path(path) / "model.pt")
    x = rows(2)
    with torch.no_grad():
        expected = torch_file.load(path)(torch.from_numpy(x)).numpy()
    async with client(create_app([f"digits={target}"])) as c:
        answer = await c.post("/v1/models/digits:predict", json={"instances": x.tolist()})
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(answer.json()["predictions"], expected, rtol=1e-5)


async def test_custom_handler_runs_its_stages(handler_file: str) -> None:
    app = create_app([f"lengths={handler_file}:Lengths", f"sums={handler_file}:Untyped"])
    async with client(app) as c:
        lengths = await c.post("/v1/models/lengths:predict", json={"instances": ["ab", "abcd"]})
        sums = await c.post("/v1/models/sums:predict", json={"instances": [[1, 2], [3, 4.5]]})
    assert lengths.json() == {"predictions": [2, 4]}
    assert sums.json() == {"predictions": [3.0, 7.5]}


async def test_several_outputs_give_an_object_per_instance(handler_file: str) -> None:
    import textwrap

    path = Path(handler_file).with_name("two.py")
    path.write_text(
        textwrap.dedent(
            """
            class Two:
                def predict(self, inputs):
                    x = next(iter(inputs.values()))
                    return {"double": x * 2, "negative": -x}
            """
        )
    )
    async with client(create_app([f"two={path}:Two"])) as c:
        answer = await c.post("/v1/models/two:predict", json={"instances": [1, 2]})
    assert answer.json() == {
        "predictions": [{"double": 2, "negative": -1}, {"double": 4, "negative": -2}]
    }


async def test_xgboost_explanations_are_tree_shap_by_feature(
    xgboost_model: Callable[..., str],
) -> None:
    import xgboost as xgb

    path = xgboost_model()
    x = rows(2, seed=5)
    booster = xgb.Booster(model_file=str(Path(path) / "model.ubj"))
    margins = booster.predict(xgb.DMatrix(x, feature_names=FEATURES), output_margin=True)
    async with client(create_app([path])) as c:
        answer = await c.post("/v1/models/churn:explain", json={"instances": x.tolist()})
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["method"] == "tree_shap" and found["feature_names"] == FEATURES
    assert len(found["predictions"]) == 2 and len(found["explanations"]) == 2
    for explanation, margin in zip(found["explanations"], margins, strict=True):
        assert list(explanation["attributions"]) == FEATURES
        total = sum(explanation["attributions"].values()) + explanation["bias"]
        assert total == pytest.approx(float(margin), abs=1e-4)  # SHAP values add up


async def test_multiclass_xgboost_explains_each_class(xgboost_model: Callable[..., str]) -> None:
    path = xgboost_model("kinds", classes=3)
    async with client(create_app([path])) as c:
        answer = await c.post("/v1/models/kinds:explain", json={"instances": rows(1).tolist()})
    found = answer.json()
    assert np.asarray(found["predictions"]).shape == (1, 3)
    attributions = found["explanations"][0]["attributions"]
    assert list(attributions) == FEATURES and all(len(v) == 3 for v in attributions.values())
    assert len(found["explanations"][0]["bias"]) == 3


_TORCH_EXPLAIN = importlib.util.find_spec("headwater.models.torch_explain") is not None


@pytest.mark.skipif(
    not _TORCH_EXPLAIN,
    reason="headwater.models.torch_explain (the PyTorch issue's Captum explain) is not "
    "in this tree yet",
)
@pytest.mark.parametrize("method", ["integrated_gradients", "occlusion"])
async def test_torch_explanations_come_from_captum(
    torch_model: Callable[..., str], method: str
) -> None:
    pytest.importorskip("captum")
    x = rows(2, seed=6)
    body = {"instances": x.tolist(), "parameters": {"method": method, "n_steps": 8}}
    if method == "occlusion":
        body["parameters"] = {"method": method}
    async with client(create_app([f"digits={torch_model()}"])) as c:
        answer = await c.post("/v1/models/digits:explain", json=body)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["method"] == method
    assert len(found["predictions"]) == 2
    for explanation in found["explanations"]:
        assert len(explanation["attributions"]) == 4  # one per input feature
        assert explanation["target"] in (0, 1, 2)
        assert ("delta" in explanation) == (method == "integrated_gradients")
