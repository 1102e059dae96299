"""On a machine with an NVIDIA GPU, XGBoost models predict on it, with the CPU's answers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from headwater.serving.resolve import resolve
from headwater.serving.runtimes import create_runtime

from .helpers import rows

pytestmark = pytest.mark.gpu


def test_xgboost_predicts_on_the_gpu(xgboost_model: Callable[..., str]) -> None:
    xgb = pytest.importorskip("xgboost")
    if not xgb.build_info().get("USE_CUDA"):
        pytest.skip("this XGBoost is built without CUDA")
    from headwater.models import xgboost_file

    path = xgboost_model()
    runtime = create_runtime(resolve(path))
    runtime.load()
    x = rows(8)
    found = runtime.predict({"input-0": x})["predict"]
    explained = runtime.explain({"input-0": x}, options={})
    cpu = xgboost_file.load(path)
    cpu.set_param({"device": "cpu"})
    names = list(runtime.metadata.feature_names or ())
    expected = cpu.predict(xgb.DMatrix(x, feature_names=names))
    assert runtime.metadata.details["device"] == "cuda"
    np.testing.assert_allclose(found, expected, rtol=1e-5)
    assert explained.attributions.shape == (8, 4)
