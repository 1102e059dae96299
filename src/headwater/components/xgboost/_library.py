"""The optional libraries the XGBoost components need, or an error naming the extra.

`xgboost` is the model format's (`headwater.models.libraries`); Dask's only the components need.
"""

from __future__ import annotations

from typing import Any

from headwater.errors import MissingDependencyError
from headwater.models.libraries import xgboost

__all__ = ["xgboost", "xgboost_dask"]


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
