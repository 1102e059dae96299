"""The optional libraries the PyTorch components need, or an error naming the extra.

`torch` and `captum` are the model formats' (`headwater.models.libraries`); Lightning only
the components need.
"""

from __future__ import annotations

from typing import Any

from headwater._deps import require
from headwater.models.libraries import TORCH_INSTALL, captum, torch

__all__ = ["captum", "lightning", "torch"]


def lightning() -> Any:
    """`lightning.pytorch`, or a MissingDependencyError naming the extra."""
    _ = torch()
    return require("lightning.pytorch", "torch", "Lightning training", install=TORCH_INSTALL)
