"""The XGBoost functions' parts that need no cluster: hyperparameters, splits, metrics, files."""

from __future__ import annotations

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("dask")
