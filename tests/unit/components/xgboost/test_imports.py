"""The XGBoost modules import neither XGBoost, Dask nor KFP until a function runs."""

from __future__ import annotations

from collections.abc import Callable


def test_importing_the_functions_imports_no_heavy_library(
    imported_after: Callable[..., list[str]],
) -> None:
    statement = (
        "import headwater.components.xgboost\n"
        "import headwater.components.xgboost.training, headwater.components.xgboost.evaluation"
    )
    heavy = ("xgboost", "dask", "distributed", "kfp", "pandas", "pyarrow")
    assert imported_after(statement, heavy) == []
