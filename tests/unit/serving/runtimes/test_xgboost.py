"""`XGBoostRuntime` predicts through XGBoost's C entry point exactly as `inplace_predict` does."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

from headwater.serving.resolve import resolve
from headwater.serving.runtimes import create_runtime
from headwater.serving.runtimes.xgboost import XGBoostRuntime, _dense_predictor

from ..helpers import rows

pytest.importorskip("xgboost")


@pytest.fixture
def runtime(xgboost_model: Callable[..., str]) -> Callable[..., XGBoostRuntime]:
    def make(classes: int = 2) -> XGBoostRuntime:
        loaded = create_runtime(resolve(xgboost_model(f"m{classes}", classes=classes)))
        loaded.load()
        assert isinstance(loaded, XGBoostRuntime)
        return loaded

    return make


@pytest.mark.parametrize("classes", [2, 3], ids=["binary", "softprob"])
@pytest.mark.parametrize("n", [1, 7, 300], ids=["1-row", "7-rows", "300-rows"])
def test_the_direct_path_predicts_what_inplace_predict_does(
    runtime: Callable[..., XGBoostRuntime], classes: int, n: int
) -> None:
    loaded = runtime(classes)
    assert loaded._dense is not None  # this XGBoost has the entry point
    x = rows(n, seed=n)
    x[0, 1] = np.nan
    got = loaded.predict({"input-0": x})["predict"]
    expected = loaded._booster.inplace_predict(x)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_a_strided_view_is_predicted_as_its_rows(runtime: Callable[..., XGBoostRuntime]) -> None:
    loaded = runtime()
    wide = rows(10, seed=3).repeat(2, axis=1)
    view = wide[:, ::2]  # not C-contiguous
    np.testing.assert_array_equal(
        loaded.predict({"input-0": view})["predict"],
        loaded._booster.inplace_predict(np.ascontiguousarray(view)),
    )


def test_a_wrong_feature_count_is_a_value_error(runtime: Callable[..., XGBoostRuntime]) -> None:
    with pytest.raises(ValueError, match="Feature shape mismatch, expected: 4, got 3"):
        runtime().predict({"input-0": rows(2)[:, :3]})


def test_threads_each_get_their_own_answers(runtime: Callable[..., XGBoostRuntime]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    loaded = runtime()
    inputs = [rows(1 + i % 5, seed=i) for i in range(64)]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda x: loaded.predict({"input-0": x})["predict"], inputs))
    for x, got in zip(inputs, answers, strict=True):
        np.testing.assert_array_equal(got, loaded._booster.inplace_predict(x))


def test_an_xgboost_without_the_entry_point_keeps_inplace_predict() -> None:
    assert _dense_predictor(SimpleNamespace(core=SimpleNamespace()), object(), 4) is None
