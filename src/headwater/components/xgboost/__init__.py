"""XGBoost on Dask: train a model on the run's cluster and evaluate it, on CPUs or GPUs.

`from headwater.components.xgboost import train_xgboost, evaluate_classifier` gives the KFP
components (for pipelines). The plain functions they call, usable in scripts and notebooks,
live in the modules `training` and `evaluation`; they compute on
`headwater.compute.get_client()` and train with `device="cuda"` (reading with cuDF) when every
worker has a GPU.
"""

from __future__ import annotations

from typing import Any

__all__ = ["evaluate_classifier", "train_xgboost"]


def __getattr__(name: str) -> Any:
    # The components import kfp.dsl (half a second); the plain functions do not need it.
    if name in __all__:
        from headwater.components.xgboost import components

        return getattr(components, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
