"""The optional libraries the XGBoost components need, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater.errors import MissingDependencyError


def xgboost() -> Any:
    """`xgboost`, or a MissingDependencyError naming the extra."""
    try:
        import xgboost
    except ImportError as exc:
        raise MissingDependencyError(
            "XGBoost training needs 'xgboost'. Install it with: pip install 'headwater[xgboost]'"
        ) from exc
    return xgboost


def xgboost_dask() -> Any:
    """`xgboost.dask`, or a MissingDependencyError naming the extras."""
    _ = xgboost()
    try:
        import xgboost.dask as dxgb
    except ImportError as exc:
        raise MissingDependencyError(
            "XGBoost on Dask needs 'xgboost' and Dask's distributed scheduler. Install them "
            "with: pip install 'headwater[dask,xgboost]'"
        ) from exc
    return dxgb
