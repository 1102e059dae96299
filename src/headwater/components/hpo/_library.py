"""The optional library the tuning components need, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater._deps import require
from headwater.errors import MissingDependencyError


def ax() -> Any:
    """The `ax` package (Ax 1.x: `Client`, `RangeParameterConfig`, ...), or a
    MissingDependencyError naming the extra."""
    ax = require("ax", "hpo", "Hyperparameter tuning", package="ax-platform")
    if not hasattr(ax, "Client"):
        raise MissingDependencyError(
            f"Hyperparameter tuning needs Ax 1.x (its Client API); ax-platform "
            f"{getattr(ax, '__version__', '?')} is installed. Upgrade it with: "
            "pip install -U 'headwater[hpo]'"
        )
    return ax
