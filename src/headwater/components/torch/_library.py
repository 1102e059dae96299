"""The optional libraries the PyTorch components need, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater.errors import MissingDependencyError

_INSTALL = (
    "Install it with: pip install torch==2.13.0 'headwater[torch]' (pin torch first, or pip "
    "may pull a CUDA build)"
)


def torch() -> Any:
    """`torch`, or a MissingDependencyError naming the extra."""
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(f"PyTorch components need 'torch'. {_INSTALL}") from exc
    return torch


def lightning() -> Any:
    """`lightning.pytorch`, or a MissingDependencyError naming the extra."""
    _ = torch()
    try:
        import lightning.pytorch as pl
    except ImportError as exc:
        raise MissingDependencyError(f"Lightning training needs 'lightning'. {_INSTALL}") from exc
    return pl


def captum() -> Any:
    """`captum.attr`, or a MissingDependencyError naming the extra."""
    _ = torch()
    try:
        import captum.attr
    except ImportError as exc:
        raise MissingDependencyError(f"Explanations need 'captum'. {_INSTALL}") from exc
    return captum.attr
