"""Headwater: run Kubeflow Pipelines (KFP v2) pipelines anywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Run", "__version__", "run"]

if TYPE_CHECKING:
    from headwater.engine.runner import Run


def run(pipeline: Any, arguments: dict[str, Any] | None = None, **options: Any) -> Run:
    """Run a KFP pipeline to completion; see `headwater.engine.runner.run` for the options."""
    from headwater.engine.runner import run as _run

    return _run(pipeline, arguments, **options)


def __getattr__(name: str) -> Any:
    if name == "Run":
        from headwater.engine.runner import Run

        return Run
    raise AttributeError(f"module 'headwater' has no attribute {name!r}")
