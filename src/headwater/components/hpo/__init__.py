"""Hyperparameter tuning with Ax (BoTorch underneath): an experiment, its trials, the best.

`from headwater.components.hpo import create_experiment, suggest_trials, complete_trials`
gives the KFP components (for pipelines; `headwater.hpo.tune` wires them into rounds). The
plain functions they call, usable in scripts and notebooks, live in the module `experiment`
(over one JSON file: Ax's own snapshot); `search_space` checks a search space without Ax.
Needs the `hpo` extra: `pip install 'headwater[hpo]'`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["complete_trials", "create_experiment", "suggest_trials"]


def __getattr__(name: str) -> Any:
    # The components import kfp.dsl (half a second); the plain functions do not need it.
    if name in __all__:
        from headwater.components.hpo import components

        return getattr(components, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
