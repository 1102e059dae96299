"""The optional libraries the PyTorch components need, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater._deps import require

_INSTALL = (
    "pip install torch==2.13.0 'headwater[torch]' (pin torch first, or pip may pull a CUDA build)"
)


def torch() -> Any:
    """`torch`, or a MissingDependencyError naming the extra."""
    return require("torch", "torch", "Headwater's PyTorch support", install=_INSTALL)


def lightning() -> Any:
    """`lightning.pytorch`, or a MissingDependencyError naming the extra."""
    _ = torch()
    return require("lightning.pytorch", "torch", "Lightning training", install=_INSTALL)


def captum() -> Any:
    """`captum.attr`, or a MissingDependencyError naming the extra."""
    _ = torch()
    return require("captum.attr", "torch", "Explaining a model", install=_INSTALL)
