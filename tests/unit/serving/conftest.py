"""The model server in-process: real models on disk, served through httpx's ASGI transport.

Factories write a real model of each kind into the test's tmp_path and return the MODEL spec
that serves it; `client(app)` talks to an app without a socket.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

import numpy as np

from .helpers import FEATURES, HANDLER_CODE, TORCH_CODE, rows


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def xgboost_model(tmp_path: Path) -> Callable[..., str]:
    """Factory: a booster (binary, or `classes` > 2) as train_xgboost's Model artifact."""
    xgb = pytest.importorskip("xgboost")
    from headwater.models import xgboost_file

    def make(name: str = "churn", classes: int = 2) -> str:
        x = rows(200, seed=1)
        y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 1).astype(int) * (classes > 2)
        params: dict[str, Any] = {"max_depth": 2, "nthread": 1}
        if classes > 2:
            params |= {"objective": "multi:softprob", "num_class": classes}
        else:
            params |= {"objective": "binary:logistic"}
        matrix = xgb.DMatrix(x, label=y, feature_names=FEATURES)
        booster = xgb.train(params, matrix, num_boost_round=5)
        where = tmp_path / name
        meta = {"framework": "xgboost", "feature_names": FEATURES, "objective": params["objective"]}
        xgboost_file.save(booster, str(where), meta)
        return str(where)

    return make


@pytest.fixture
def sklearn_model(tmp_path: Path) -> Callable[..., str]:
    """Factory: a fitted LogisticRegression (string classes) as a .joblib file."""
    pytest.importorskip("sklearn")
    import joblib
    from sklearn.linear_model import LogisticRegression

    def make(name: str = "iris.joblib") -> str:
        x = rows(60, seed=2)
        labels = np.where(x[:, 0] > 0, "yes", "no")
        model = LogisticRegression().fit(x, labels)
        path = tmp_path / name
        joblib.dump(model, path)
        return str(path)

    return make


@pytest.fixture
def torch_model(tmp_path: Path) -> Callable[..., str]:
    """Factory: a module saved by `torch_file.save` (state dict, TorchScript, code/)."""
    torch = pytest.importorskip("torch")
    from headwater.loading import load_file
    from headwater.models import torch_file

    code = tmp_path / "net.py"
    code.write_text(TORCH_CODE)

    def make(name: str = "digits") -> str:
        torch.manual_seed(0)
        module = load_file(code).Net(features=4, classes=3)
        where = tmp_path / name
        torch_file.save(
            module,
            str(where),
            class_path="Net",
            module_args={"features": 4, "classes": 3},
            example=torch.ones(1, 4),
            code_path=str(code),
        )
        return str(where)

    return make


@pytest.fixture
def handler_file(tmp_path: Path) -> str:
    """A handler module file defining `Lengths` and `Untyped`."""
    path = tmp_path / "handlers.py"
    path.write_text(textwrap.dedent(HANDLER_CODE))
    return str(path)
