"""The tuning pattern: a ParallelFor of train_lightning trials, each given its parameters as a
dict and returning its objective, then a step that picks the best from the collected values."""

from typing import List

from kfp import dsl

from headwater.components.torch import prepare_digits, train_lightning


@dsl.component
def pick_best(trials: List[dict], objectives: List[float]) -> dict:
    best = max(range(len(objectives)), key=objectives.__getitem__)
    return {**trials[best], "objective": objectives[best]}


@dsl.pipeline(name="torch-trials")
def torch_trials(
    trials: List[dict] = [{"lr": 0.003, "width": 8}, {"lr": 0.3, "width": 4}],
    trainer_args: dict = {"max_epochs": 2, "enable_model_summary": False},
) -> dict:
    data = prepare_digits(seed=0)
    with dsl.ParallelFor(trials, parallelism=2) as trial:
        trained = train_lightning(
            module="headwater.components.torch.digits:DigitsClassifier",
            data_module="headwater.components.torch.digits:DigitsDataModule",
            data=data.outputs["data"],
            hyperparameters=trial,
            trainer_args=trainer_args,
            objective="val_acc",
        )
    best = pick_best(trials=trials, objectives=dsl.Collected(trained.outputs["Output"]))
    return best.output
