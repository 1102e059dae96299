"""The Model artifact's layout, and an artifact that is not an XGBoost model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("xgboost")

import xgboost as xgb

from headwater.errors import UserError
from headwater.models import xgboost_file


def _booster() -> xgb.Booster:
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = (x[:, 0] > 20).astype(np.float32)
    dtrain = xgb.DMatrix(x, label=y, feature_names=["a", "b"])
    return xgb.train({"objective": "binary:logistic", "nthread": 1}, dtrain, 3)


def test_a_saved_model_loads_as_it_was(tmp_path: Path) -> None:
    booster = _booster()
    path = xgboost_file.save(booster, str(tmp_path / "model"), {"framework": "xgboost"})
    assert Path(path) == tmp_path / "model" / "model.ubj"
    loaded = xgboost_file.load(str(tmp_path / "model"))
    assert loaded.feature_names == ["a", "b"] and loaded.num_boosted_rounds() == 3
    assert xgboost_file.load(path).num_boosted_rounds() == 3  # the file itself also loads
    assert xgboost_file.metadata(str(tmp_path / "model")) == {"framework": "xgboost"}


def test_a_file_that_is_not_a_model_is_named(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.ubj").write_text("these are not the trees you are looking for")
    with pytest.raises(UserError, match=r"model\.ubj' is not an XGBoost model \(XGBoost says"):
        xgboost_file.load(str(tmp_path / "model"))


def test_a_directory_without_a_model_is_named(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.pt").write_bytes(b"\0")
    with pytest.raises(UserError, match=r"holds no model\.ubj \(files: weights\.pt\)"):
        xgboost_file.load(str(tmp_path / "model"))


def test_a_missing_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"model artifact '.*nowhere' does not exist"):
        xgboost_file.load(str(tmp_path / "nowhere"))
