"""`headwater.hpo.tune` around a cheap train component: a quadratic of two parameters, lowest
at x=0.3, w=20. The centre of the space (x=0.5, always Ax's first trial) raises, so one trial
of round 1 fails; `fail_all=True` makes every trial raise."""

from kfp import dsl

from headwater.hpo import tune


@dsl.component
def quadratic(hyperparameters: dict = {}, fail_all: bool = False) -> float:
    x = hyperparameters["x"]
    w = hyperparameters["w"]
    if not isinstance(w, int):
        raise TypeError(f"w should be an int, got {w!r}")
    if fail_all or x == 0.5:
        raise ValueError(f"diverged at x={x}")
    return (x - 0.3) ** 2 + (w - 20) ** 2 / 1000


SPACE = [
    {"name": "x", "bounds": [0.0, 1.0], "parameter_type": "float"},
    {"name": "w", "bounds": [4, 64], "parameter_type": "int", "scaling": "log"},
]

hpo_quadratic = tune(
    quadratic, SPACE, "loss", minimize=True, rounds=2, trials_per_round=2, seed=0, max_rounds=3
)
