"""PyTorch on Headwater: Lightning training, distributed data-parallel jobs, explanations.

`from headwater.components.torch import train_lightning, evaluate_lightning, explain_model,
pytorch_job, prepare_digits` gives the KFP components (for pipelines). The plain functions
they call live in the modules `training`, `evaluation`, `job` and `explain`, usable in
scripts and notebooks; the Model artifact's layout is `headwater.models.torch_file`.
Needs the `torch` extra: `pip install torch==2.13.0 'headwater[torch]'`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "evaluate_lightning",
    "explain_model",
    "prepare_digits",
    "pytorch_job",
    "train_lightning",
]


def __getattr__(name: str) -> Any:
    # The components import kfp.dsl (half a second); the plain functions do not need it.
    if name in __all__:
        from headwater.components.torch import components

        return getattr(components, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
