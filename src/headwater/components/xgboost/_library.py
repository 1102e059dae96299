"""The optional libraries the XGBoost components need, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater._deps import require


def xgboost() -> Any:
    """`xgboost`, or a MissingDependencyError naming the extra."""
    return require("xgboost", "xgboost", "XGBoost training")


def xgboost_dask() -> Any:
    """`xgboost.dask`, or a MissingDependencyError naming the extras."""
    _ = xgboost()
    return require("xgboost.dask", "dask,xgboost", "XGBoost on Dask", package="distributed")
