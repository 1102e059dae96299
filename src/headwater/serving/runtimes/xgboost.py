"""`XGBoostRuntime`: XGBoost boosters, with TreeSHAP explanations.

Reads a Model artifact from `train_xgboost` (a directory with `model.ubj` and
`metadata.json`) or a booster file (`.ubj`, `.json`, legacy binary). The input is one FP32
tensor `input-0` shaped `[-1, features]`; the output `predict` is what `Booster.predict`
gives (probabilities for `binary:logistic`, one column per class for `multi:softprob`).

A model whose metadata holds a transform (`train_xgboost` stores the one `preprocess` wrote;
see `headwater.models.transform`) takes the raw rows its pipeline started from: `input-0` is
declared `[-1, raw features]`, V1 objects are keyed by the raw feature names, and each raw
row goes through the transform before predicting. Rows of the model's own features (as
`preprocess` wrote them) are still taken, told apart by width; any other width is a 400
naming both. V2 model metadata says so under `parameters` (`input_form: "raw"`). A model
without a transform is served as it always was.

Threads: each prediction runs with `nthread` 1 (or `OMP_NUM_THREADS`), because the server
predicts many requests at once on its thread pool and scales further with worker processes;
XGBoost's default of every core per call makes concurrent requests fight for the CPU. On a
machine with an NVIDIA GPU (and an XGBoost built with CUDA) the booster predicts on it
(`device="cuda"`).

On the CPU, `predict` calls XGBoost's C entry point for dense in-place prediction
(`XGBoosterPredictFromDense`, the one `Booster.inplace_predict` ends in) directly, with its
JSON arguments built once: the Python wrapper around it cost more than the prediction of a
row (it builds a class, checks a dozen input kinds and serialises two JSON documents a call).
`load` compares the two on probe rows and keeps `inplace_predict` unless they agree to the
bit, or if this XGBoost does not have the entry point.

Explanations are XGBoost's own TreeSHAP (`pred_contribs=True`): per example one attribution
per feature, named from the model, and the bias they add up to with it.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from headwater.errors import UserError
from headwater.models.transform import Transform, describe
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
        self._dense: Callable[[np.ndarray], np.ndarray] | None = None
        self._transform: Transform | None = None
        self.device = "cpu"

    def load(self) -> None:
        """Load the booster, work out its features and output shape, and read its transform."""
        from headwater.models import libraries, xgboost_file

        xgb = libraries.xgboost()
        path = str(self.source.path)
        booster = xgboost_file.load(path)
        saved = xgboost_file.metadata(path)
        saved = saved if saved.get("framework") in (None, "xgboost") else {}
        booster.set_param({"nthread": _threads()})
        if _gpu_present(xgb):
            booster.set_param({"device": "cuda"})
            self.device = "cuda"
        features = int(booster.num_features())
        names = booster.feature_names or saved.get("feature_names")
        feature_names = tuple(str(n) for n in names) if names and len(names) == features else None
        self._transform = _transform(saved, path, feature_names, features)
        self._booster, self._xgb = booster, xgb
        self._names = list(feature_names) if feature_names else None
        self._dense = _dense_predictor(xgb, booster, features) if self.device == "cpu" else None
        # One row of zeros: the output's shape (a class axis or not), and a warm booster.
        probe = self._predict(np.zeros((1, features), dtype=np.float32))
        details = {"objective": saved.get("objective"), "device": self.device}
        if self._transform is None:
            self.metadata = ModelMetadata(
                platform="xgboost",
                inputs=(TensorSpec(INPUT, "FP32", (-1, features)),),
                outputs=(TensorSpec(OUTPUT, "FP32", (-1, *probe.shape[1:])),),
                default_outputs=(OUTPUT,),
                feature_names=feature_names,
                details=details,
            )
            return
        raw = self._transform.inputs
        model_features = self._transform.outputs
        added = model_features[len(raw) :]
        hint = f"raw rows of {len(raw)} features ({describe(raw)})"
        if added:
            hint += f", or rows of the model's {features} (the raw ones, then {', '.join(added)})"
        self.metadata = ModelMetadata(
            platform="xgboost",
            # Raw rows are what the model is declared to take; rows of its own features
            # (what preprocess wrote) are taken too, told apart by width.
            inputs=(
                TensorSpec(
                    INPUT,
                    "FP32",
                    (-1, len(raw)),
                    also=((-1, features),) if features != len(raw) else (),
                    hint=hint,
                ),
            ),
            outputs=(TensorSpec(OUTPUT, "FP32", (-1, *probe.shape[1:])),),
            default_outputs=(OUTPUT,),
            feature_names=raw,
            details={**details, "input_form": "raw"},
            parameters={
                "input_form": "raw",
                "raw_features": list(raw),
                "feature_names": list(model_features),
                "transform": self._transform.to_json(),
            },
        )

    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """`Booster.predict` on the input rows (raw rows transformed first): `{"predict": ...}`."""
        return {OUTPUT: self._predict(self._features(self.single_input(inputs)))}

    def explain(
        self, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """TreeSHAP attributions (`pred_contribs=True`) and the bias they add up to, per model
        feature (derived ones included, for raw rows)."""
        check_options(options, (), what="an XGBoost explanation (TreeSHAP)")
        x = self._features(self.single_input(inputs))
        matrix = self._xgb.DMatrix(x, feature_names=self._names)
        contributions = np.asarray(self._booster.predict(matrix, pred_contribs=True))
        return Explanation(
            method="tree_shap",
            predictions=self._predict(x),
            attributions=contributions[..., :-1],
            feature_names=self._names,
            bias=contributions[..., -1],
        )

    def _features(self, x: np.ndarray) -> np.ndarray:
        """Rows of the model's features: raw rows through the transform, others as they are
        (the server let only the two widths through)."""
        found = self._transform
        if found is None or x.ndim != 2 or x.shape[1] != len(found.inputs):
            return x
        return found.apply(x)

    def unload(self) -> None:
        """Drop the booster."""
        self._booster = None
        super().unload()

    def _predict(self, x: np.ndarray) -> np.ndarray:
        if self._dense is not None and x.dtype == np.float32 and x.ndim == 2:
            return self._dense(x)
        if self.device == "cpu":
            # Thread-safe, and no DMatrix to build: the fastest path for small batches.
            return np.asarray(self._booster.inplace_predict(x))
        # On a GPU booster, host data would make inplace_predict warn and fall back anyway.
        matrix = self._xgb.DMatrix(x, feature_names=self._names)
        return np.asarray(self._booster.predict(matrix))


def _transform(
    saved: Mapping[str, Any], path: str, names: tuple[str, ...] | None, features: int
) -> Transform | None:
    """The transform in the model's metadata (`train_xgboost` stores `preprocess`'s), or None.

    Raises:
        UserError: It cannot be read, or it does not make the booster's features.
    """
    if saved.get("transform") is None:
        return None
    try:
        found = Transform.from_json(saved["transform"])
    except UserError as exc:
        raise UserError(f"model artifact {path!r}: {exc}") from exc
    made = found.outputs
    if len(made) != features or (names is not None and tuple(names) != made):
        raise UserError(
            f"model artifact {path!r} has a transform making {len(made)} features "
            f"({describe(made)}) but its booster takes {features}"
            + (f" ({describe(names)})" if names else "")
            + ": the metadata.json is not this model's"
        )
    return found


def _dense_predictor(
    xgb: Any, booster: Any, features: int
) -> Callable[[np.ndarray], np.ndarray] | None:
    """`booster.inplace_predict` for 2-D float32 rows through the C API, or None where this
    XGBoost lacks it or the two do not agree on probe rows (see the module docstring)."""
    lib = getattr(getattr(xgb, "core", None), "_LIB", None)
    entry = getattr(lib, "XGBoosterPredictFromDense", None)
    last_error = getattr(lib, "XGBGetLastError", None)
    if entry is None or last_error is None:
        return None
    handle = booster.handle
    # What inplace_predict passes for its defaults: value predictions, all trees, NaN missing.
    args = json.dumps(
        {
            "type": 0,
            "training": False,
            "iteration_begin": 0,
            "iteration_end": 0,
            "missing": float("nan"),
            "strict_shape": False,
            "cache_id": 0,
        }
    ).encode()
    typestr = np.dtype(np.float32).str

    def predict(x: np.ndarray) -> np.ndarray:
        if x.shape[1] != features:  # what inplace_predict's validate_features says
            raise ValueError(f"Feature shape mismatch, expected: {features}, got {x.shape[1]}")
        x = np.ascontiguousarray(x)
        interface = (
            f'{{"data": [{x.ctypes.data}, false], "strides": null, "typestr": "{typestr}", '
            f'"shape": [{x.shape[0]}, {x.shape[1]}], "version": 3}}'
        ).encode()
        shape = ctypes.POINTER(ctypes.c_uint64)()
        dims = ctypes.c_uint64()
        out = ctypes.POINTER(ctypes.c_float)()
        status = entry(
            handle,
            interface,
            args,
            None,
            ctypes.byref(shape),
            ctypes.byref(dims),
            ctypes.byref(out),
        )
        if status != 0:
            message = last_error()
            raise xgb.core.XGBoostError(message.decode() if message else "XGBoost failed")
        result = np.empty(tuple(int(shape[i]) for i in range(dims.value)), dtype=np.float32)
        if result.size:  # `out` is XGBoost's per-thread buffer: copy before the next call
            ctypes.memmove(result.ctypes.data, out, result.nbytes)
        return result

    rows = np.random.default_rng(0).normal(size=(16, features)).astype(np.float32)
    rows[3, ::2] = np.nan
    try:
        for probe in (rows[:1], rows, np.zeros((1, features), dtype=np.float32)):
            expected = np.asarray(booster.inplace_predict(probe))
            if not np.array_equal(predict(probe), expected, equal_nan=True):
                return None
    except Exception:
        return None
    return predict


def _threads() -> int:
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _gpu_present(xgb: Any) -> bool:
    """An NVIDIA GPU is visible and this XGBoost can use it."""
    from headwater.machine import detect_gpus

    try:
        built_with_cuda = bool(xgb.build_info().get("USE_CUDA"))
    except Exception:
        return False
    return built_with_cuda and bool(detect_gpus())
