"""Hyperparameter tuning as a pipeline: `tune(train_component, search_space, objective)`.

`tune` builds a KFP pipeline of Bayesian optimisation rounds (Ax's `Client`, BoTorch models),
each a `dsl.ParallelFor` of trials of your train component, unrolled in the IR so it runs
under `headwater run`, on Kubeflow and on Vertex. `trial_component` is the wrapper that
records a failed trial as a value. The steps themselves are the components and plain
functions of `headwater.components.hpo`. Needs the `hpo` extra: `pip install 'headwater[hpo]'`.
"""

from __future__ import annotations

from headwater.hpo.trials import trial_component
from headwater.hpo.tuning import tune

__all__ = ["trial_component", "tune"]
