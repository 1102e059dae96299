"""The optional libraries the XGBoost components need, or an error naming the extra.

`xgboost` is the model format's (`headwater.models.libraries`); Dask's only the components need.
"""

from __future__ import annotations

from typing import Any

from headwater._deps import require
from headwater.models.libraries import xgboost

__all__ = ["xgboost", "xgboost_dask"]


def xgboost_dask() -> Any:
    """`xgboost.dask`, or a MissingDependencyError naming the extras."""
    _ = xgboost()
    return require("xgboost.dask", "dask,xgboost", "XGBoost on Dask", package="distributed")
