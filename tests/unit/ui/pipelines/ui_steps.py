"""Metrics over steps and tuning trials, cheaply: `fit` logs a loss and an accuracy per epoch
with `headwater.log_step`; `trials` runs three trials through the real trial wrapper
(`headwater.hpo.trial_component`, as `tune()` does, without Ax): one fails."""

from kfp import dsl
from kfp.dsl import Metrics, Output

from headwater.hpo import trial_component


@dsl.component
def fit(metrics: Output[Metrics], epochs: int = 12, rate: float = 0.2) -> float:
    from headwater import log_step

    loss = 1.0
    for epoch in range(epochs):
        loss *= 1 - rate
        log_step(metrics, "loss", loss, step=epoch)
        log_step(metrics, "acc", 1 - loss)  # the next step: 0, 1, 2, ...
    metrics.log_metric("epochs", epochs)
    return loss


@dsl.component
def quadratic(hyperparameters: dict = {}) -> float:  # noqa: B006  (KFP reads a literal)
    x = hyperparameters["x"]
    if x < 0:
        raise ValueError(f"diverged at x={x}")
    return (x - 0.3) ** 2


@dsl.component
def create_experiment(objective: str, minimize: bool) -> str:
    """What `tune()`'s first task says of the objective (its inputs), without Ax."""
    return objective


trial = trial_component(quadratic, objective="loss")


@dsl.pipeline(name="ui-steps")
def ui_steps(epochs: int = 12, rate: float = 0.2, tune: bool = False) -> float:
    fitted = fit(epochs=epochs, rate=rate)
    with dsl.If(tune == True):  # noqa: E712  (a KFP condition, not a Python comparison)
        create_experiment(objective="loss", minimize=True)
        with dsl.ParallelFor(
            [
                {"trial_index": 0, "parameters": {"x": 0.9}},
                {"trial_index": 1, "parameters": {"x": -1.0}},
                {"trial_index": 2, "parameters": {"x": 0.4}},
            ]
        ) as item:
            trial(trial=item)
    return fitted.outputs["Output"]
