"""`SklearnRuntime`: scikit-learn estimators (and pipelines) saved with joblib or pickle.

Reads a `.joblib`, `.pkl` or `.pickle` file, or a directory holding one `model.joblib` /
`model.pkl`. Loading a pickle runs code from it: serve only files you trust, as with any
pickle. The input is one FP64 tensor `input-0` shaped `[-1, n_features_in_]`; the outputs
are `predict` (the default) and, where the estimator has them, `predict_proba` and
`decision_function`: ask for them by name in V2 `outputs`.

An estimator fitted on a DataFrame remembers its column names (`feature_names_in_`); the
rows are then handed to it as a DataFrame with those columns (pandas), as it was fitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from headwater._deps import require
from headwater.errors import UserError
from headwater.serving.runtimes.base import ModelMetadata, ModelRuntime
from headwater.serving.tensors import TensorSpec, datatype_of

INPUT = "input-0"
PREDICT = "predict"
#: Estimator methods served as outputs besides `predict`, when the estimator has them.
EXTRA_OUTPUTS = ("predict_proba", "decision_function")
#: Files a model directory may hold, in the order they are looked for.
FILES = ("model.joblib", "model.pkl", "model.pickle")


class SklearnRuntime(ModelRuntime):
    """Serves a fitted scikit-learn estimator (see the module docstring)."""

    framework = "sklearn"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._model: Any = None
        self._columns: list[str] | None = None

    def load(self) -> None:
        """Unpickle the estimator and work out its features and outputs."""
        joblib = require(
            "joblib",
            "serve",
            "Serving scikit-learn models",
            package="scikit-learn",
            install="pip install 'headwater[serve]' scikit-learn",
        )
        path = _model_file(Path(str(self.source.path)))
        try:
            model = joblib.load(path)
        except Exception as exc:
            raise UserError(
                f"{str(path)!r} is not a joblib or pickle file scikit-learn can load "
                f"({type(exc).__name__}: {exc})".splitlines()[0]
            ) from exc
        if not callable(getattr(model, "predict", None)):
            raise UserError(
                f"{str(path)!r} holds a {type(model).__name__}, which has no predict(): "
                "serve a fitted scikit-learn estimator"
            )
        features = getattr(model, "n_features_in_", None)
        columns = getattr(model, "feature_names_in_", None)
        self._model = model
        self._columns = [str(c) for c in columns] if columns is not None else None
        width = int(features) if isinstance(features, int | np.integer) else -1
        names = [PREDICT] + [m for m in EXTRA_OUTPUTS if callable(getattr(model, m, None))]
        self.metadata = ModelMetadata(
            platform="sklearn",
            inputs=(TensorSpec(INPUT, "FP64", (-1, width)),),
            outputs=tuple(self._output_spec(n, width) for n in names),
            default_outputs=(PREDICT,),
            feature_names=tuple(self._columns) if self._columns else None,
            details={"estimator": type(model).__name__},
        )

    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """The estimator's `predict` (and `predict_proba`, ... when asked) on the rows."""
        x = self._rows(self.single_input(inputs))
        return {name: np.asarray(getattr(self._model, name)(x)) for name in outputs or (PREDICT,)}

    def unload(self) -> None:
        """Drop the estimator."""
        self._model = None
        super().unload()

    def _rows(self, x: np.ndarray) -> Any:
        if self._columns is None:
            return x
        try:
            import pandas as pd
        except ImportError:
            return x  # scikit-learn warns that the columns have no names, and predicts
        return pd.DataFrame(x, columns=self._columns)

    def _output_spec(self, name: str, width: int) -> TensorSpec:
        """An output's datatype and shape, from one row of zeros where the model takes it."""
        if width > 0:
            try:
                probe = np.asarray(getattr(self._model, name)(self._rows(np.zeros((1, width)))))
                return TensorSpec(name, datatype_of(probe), (-1, *probe.shape[1:]))
            except Exception:
                pass  # a pipeline that cannot take zeros (categories): shape unknown
        classes = getattr(self._model, "classes_", None)
        if name == PREDICT and classes is not None:
            return TensorSpec(name, datatype_of(np.asarray(classes)), (-1,))
        return TensorSpec(name, "FP64", (-1,) if name == PREDICT else (-1, -1))


def _model_file(path: Path) -> Path:
    if path.is_dir():
        for name in FILES:
            if (path / name).is_file():
                return path / name
        listing = ", ".join(sorted(p.name for p in path.iterdir())) or "none"
        raise UserError(
            f"model directory {str(path)!r} holds no {' or '.join(FILES)} (files: {listing})"
        )
    return path
