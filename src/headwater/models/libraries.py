"""The optional libraries the model formats need, imported on call, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater._deps import require

#: How to install the torch extra: torch pinned first, or pip may pull a CUDA build.
TORCH_INSTALL = (
    "pip install torch==2.13.0 'headwater[torch]' (pin torch first, or pip may pull a CUDA build)"
)


def torch() -> Any:
    """`torch`, or a MissingDependencyError naming the extra."""
    return require("torch", "torch", "Headwater's PyTorch support", install=TORCH_INSTALL)


def captum() -> Any:
    """`captum.attr`, or a MissingDependencyError naming the extra."""
    _ = torch()
    return require("captum.attr", "torch", "Explaining a model", install=TORCH_INSTALL)


def xgboost() -> Any:
    """`xgboost`, or a MissingDependencyError naming the extra."""
    return require("xgboost", "xgboost", "XGBoost training")
