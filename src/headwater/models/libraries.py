"""The optional libraries the model formats need, imported on call, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater._deps import require
from headwater.errors import MissingDependencyError

#: How to install the torch extra: torch pinned first, or pip may pull a CUDA build.
TORCH_INSTALL = (
    "pip install torch==2.13.0 'headwater[torch]' (pin torch first, or pip may pull a CUDA build)"
)


def require_torch(module: str, needs: str) -> Any:
    """`require(module, "torch", ...)`, with an install line that pins torch first.

    Args:
        module: The import name, dotted if need be (`"captum.attr"`).
        needs: The message's start, what needs it and the verb ("Explanations need").

    Raises:
        MissingDependencyError: `module` is not installed.
    """
    try:
        return require(module, "torch", needs)
    except MissingDependencyError as exc:
        top = module.split(".")[0]
        said = f"{needs} {top!r}. Install it with: {TORCH_INSTALL}"
        raise MissingDependencyError(said) from exc.__cause__


def torch() -> Any:
    """`torch`, or a MissingDependencyError naming the extra."""
    return require_torch("torch", "PyTorch components need")


def captum() -> Any:
    """`captum.attr`, or a MissingDependencyError naming the extra."""
    _ = torch()
    return require_torch("captum.attr", "Explanations need")


def xgboost() -> Any:
    """`xgboost`, or a MissingDependencyError naming the extra."""
    return require("xgboost", "xgboost", "XGBoost training")
