"""`XGBoostRuntime`: XGBoost boosters, with TreeSHAP explanations.

Reads a Model artifact from `train_xgboost` (a directory with `model.ubj` and
`metadata.json`) or a booster file (`.ubj`, `.json`, legacy binary). The input is one FP32
tensor `input-0` shaped `[-1, features]`; the output `predict` is what `Booster.predict`
gives (probabilities for `binary:logistic`, one column per class for `multi:softprob`).

Threads: each prediction runs with `nthread` 1 (or `OMP_NUM_THREADS`), because the server
predicts many requests at once on its thread pool and scales further with worker processes;
XGBoost's default of every core per call makes concurrent requests fight for the CPU. On a
machine with an NVIDIA GPU (and an XGBoost built with CUDA) the booster predicts on it
(`device="cuda"`).

Explanations are XGBoost's own TreeSHAP (`pred_contribs=True`): per example one attribution
per feature, named from the model, and the bias they add up to with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from headwater.serving.runtimes.base import (
    Explanation,
    ModelMetadata,
    ModelRuntime,
    check_options,
)
from headwater.serving.tensors import TensorSpec

INPUT = "input-0"
OUTPUT = "predict"


class XGBoostRuntime(ModelRuntime):
    """Serves an XGBoost `Booster` (see the module docstring)."""

    framework = "xgboost"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._booster: Any = None
        self._xgb: Any = None
        self._names: list[str] | None = None
        self.device = "cpu"

    def load(self) -> None:
        """Load the booster and work out its features and output shape."""
        from headwater.components.xgboost import _library, model_file

        xgb = _library.xgboost()
        path = str(self.source.path)
        booster = model_file.load(path)
        saved = model_file.metadata(path)
        saved = saved if saved.get("framework") in (None, "xgboost") else {}
        booster.set_param({"nthread": _threads()})
        if _gpu_present(xgb):
            booster.set_param({"device": "cuda"})
            self.device = "cuda"
        features = int(booster.num_features())
        names = booster.feature_names or saved.get("feature_names")
        feature_names = tuple(str(n) for n in names) if names and len(names) == features else None
        self._booster, self._xgb = booster, xgb
        self._names = list(feature_names) if feature_names else None
        # One row of zeros: the output's shape (a class axis or not), and a warm booster.
        probe = self._predict(np.zeros((1, features), dtype=np.float32))
        self.metadata = ModelMetadata(
            platform="xgboost",
            inputs=(TensorSpec(INPUT, "FP32", (-1, features)),),
            outputs=(TensorSpec(OUTPUT, "FP32", (-1, *probe.shape[1:])),),
            default_outputs=(OUTPUT,),
            feature_names=feature_names,
            details={"objective": saved.get("objective"), "device": self.device},
        )

    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """`Booster.predict` on the input rows: `{"predict": ...}`."""
        return {OUTPUT: self._predict(self.single_input(inputs))}

    def explain(
        self, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """TreeSHAP attributions (`pred_contribs=True`) and the bias they add up to."""
        check_options(options, (), what="an XGBoost explanation (TreeSHAP)")
        x = self.single_input(inputs)
        matrix = self._xgb.DMatrix(x, feature_names=self._names)
        contributions = np.asarray(self._booster.predict(matrix, pred_contribs=True))
        return Explanation(
            method="tree_shap",
            predictions=self._predict(x),
            attributions=contributions[..., :-1],
            feature_names=self._names,
            bias=contributions[..., -1],
        )

    def unload(self) -> None:
        """Drop the booster."""
        self._booster = None
        super().unload()

    def _predict(self, x: np.ndarray) -> np.ndarray:
        if self.device == "cpu":
            # Thread-safe, and no DMatrix to build: the fastest path for small batches.
            return np.asarray(self._booster.inplace_predict(x))
        # On a GPU booster, host data would make inplace_predict warn and fall back anyway.
        matrix = self._xgb.DMatrix(x, feature_names=self._names)
        return np.asarray(self._booster.predict(matrix))


def _threads() -> int:
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _gpu_present(xgb: Any) -> bool:
    """An NVIDIA GPU is visible and this XGBoost can use it."""
    from headwater.engine.resources import detect_gpus

    try:
        built_with_cuda = bool(xgb.build_info().get("USE_CUDA"))
    except Exception:
        return False
    return built_with_cuda and bool(detect_gpus())
