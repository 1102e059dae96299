"""A model with a recorded transform takes raw rows (V1 and V2), rows of its own features by
width, and refuses any other width in one line; its metadata says which form it takes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from headwater.models.transform import Derived, Transform
from headwater.serving.app import create_app

from .helpers import FEATURES, client, rows, v2_input

xgb = pytest.importorskip("xgboost")
pytestmark = pytest.mark.anyio

#: Four raw features, the second's nulls filled, and a fifth derived from two of them.
SPEC = Transform(
    inputs=tuple(FEATURES),
    fill={"income": 0.5},
    derived=(Derived("age_income", "sum", ("age", "income")),),
)


@pytest.fixture
def transformed_model(tmp_path: Path) -> Callable[..., Path]:
    """Factory: a booster trained on `SPEC`'s outputs, saved with the transform as
    train_xgboost saves one (`transform` of None: a metadata.json to change by hand)."""
    from headwater.models import xgboost_file

    def make(transform: dict[str, Any] | None = None) -> Path:
        x = SPEC.apply(rows(300, seed=4))
        y = (x[:, 4] > 0).astype(int)
        names = list(SPEC.outputs)
        booster = xgb.train(
            {"objective": "binary:logistic", "max_depth": 2, "nthread": 1},
            xgb.DMatrix(x, label=y, feature_names=names),
            num_boost_round=5,
        )
        meta = {
            "framework": "xgboost",
            "feature_names": names,
            "input_form": "raw",
            "raw_features": FEATURES,
            "transform": SPEC.to_json() if transform is None else transform,
        }
        where = tmp_path / "higgs"
        xgboost_file.save(booster, str(where), meta)
        return where

    return make


def _expected(model: Path, raw: np.ndarray) -> np.ndarray:
    booster = xgb.Booster(model_file=str(model / "model.ubj"))
    return np.asarray(booster.inplace_predict(SPEC.apply(raw)))


async def test_raw_rows_and_rows_of_the_models_features_are_both_answered(
    transformed_model: Callable[..., Path],
) -> None:
    model = transformed_model()
    raw = rows(3, seed=9)
    expected = _expected(model, raw)
    objects = [dict(zip(FEATURES, r.tolist(), strict=True)) for r in raw]
    async with client(create_app([f"m={model}"])) as c:
        v2_raw = await c.post("/v2/models/m/infer", json={"inputs": [v2_input(raw)]})
        v2_features = await c.post(
            "/v2/models/m/infer", json={"inputs": [v2_input(SPEC.apply(raw))]}
        )
        v1_rows = await c.post("/v1/models/m:predict", json={"instances": raw.tolist()})
        v1_objects = await c.post("/v1/models/m:predict", json={"instances": objects})
        explained = await c.post("/v1/models/m:explain", json={"instances": raw.tolist()})
    for answer in (v2_raw, v2_features):
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose(answer.json()["outputs"][0]["data"], expected, rtol=1e-6)
    for answer in (v1_rows, v1_objects):
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose(answer.json()["predictions"], expected, rtol=1e-6)
    assert explained.status_code == 200, explained.text
    # Attributions are to the model's features, the derived one included.
    assert explained.json()["feature_names"] == list(SPEC.outputs)


async def test_metadata_says_the_model_takes_raw_rows(
    transformed_model: Callable[..., Path],
) -> None:
    async with client(create_app([f"m={transformed_model()}"])) as c:
        found = (await c.get("/v2/models/m")).json()
    assert found["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4]}]
    assert found["parameters"] == {
        "input_form": "raw",
        "raw_features": FEATURES,
        "feature_names": [*FEATURES, "age_income"],
        "transform": SPEC.to_json(),
    }


@pytest.mark.parametrize("width", [3, 6], ids=["narrower", "wider"])
async def test_another_width_is_one_line_naming_both_forms(
    transformed_model: Callable[..., Path], width: int
) -> None:
    x = np.zeros((2, width), dtype=np.float32)
    async with client(create_app([f"m={transformed_model()}"])) as c:
        v2 = await c.post("/v2/models/m/infer", json={"inputs": [v2_input(x)]})
        v1 = await c.post("/v1/models/m:predict", json={"instances": x.tolist()})
    for answer in (v2, v1):
        assert answer.status_code == 400
        said = answer.json()["error"]
        assert "\n" not in said
        assert said == (
            f"input 'input-0' has shape [2, {width}]; the model takes [-1, 4] or [-1, 5] "
            "(-1: any size): raw rows of 4 features (age, income, tenure, visits), or rows of "
            "the model's 5 (the raw ones, then age_income)"
        )


@pytest.mark.parametrize(
    ("transform", "message"),
    [
        (
            {**SPEC.to_json(), "format": "headwater.transform/9"},
            "transform format 'headwater.transform/9' is not one this Headwater reads",
        ),
        (
            {**SPEC.to_json(), "derived": []},
            "has a transform making 4 features (age, income, tenure, visits) but its booster "
            "takes 5",
        ),
    ],
    ids=["newer-format", "not-this-booster"],
)
def test_a_transform_that_cannot_be_applied_fails_the_load_naming_it(
    transformed_model: Callable[..., Path], transform: dict[str, Any], message: str
) -> None:
    from headwater.errors import UserError
    from headwater.serving.resolve import resolve
    from headwater.serving.runtimes import create_runtime

    model = transformed_model(transform)
    runtime = create_runtime(resolve(str(model)))
    with pytest.raises(UserError, match=r"^model artifact .*higgs") as raised:
        runtime.load()
    assert message in str(raised.value)
    assert json.loads((model / "metadata.json").read_text())["transform"] == transform
