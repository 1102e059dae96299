"""The optional library the tuning components need, or an error naming the extra."""

from __future__ import annotations

from typing import Any

from headwater.errors import MissingDependencyError


def ax() -> Any:
    """The `ax` package (Ax 1.x: `Client`, `RangeParameterConfig`, ...), or a
    MissingDependencyError naming the extra."""
    try:
        import ax
    except ImportError as exc:
        raise MissingDependencyError(
            "Hyperparameter tuning needs 'ax-platform'. Install it with: "
            "pip install 'headwater[hpo]'"
        ) from exc
    if not hasattr(ax, "Client"):
        raise MissingDependencyError(
            f"Hyperparameter tuning needs Ax 1.x (its Client API); ax-platform "
            f"{getattr(ax, '__version__', '?')} is installed. Upgrade it with: "
            "pip install -U 'headwater[hpo]'"
        )
    return ax
