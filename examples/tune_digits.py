"""Tune the digits CNN with Ax/BoTorch: rounds of parallel trials, each round Bayesian.

    headwater run examples/tune_digits.py                                  # 3 rounds x 4 trials
    headwater run examples/tune_digits.py --param rounds=2 --param trials_per_round=2
    headwater run examples/tune_digits.py --executor dask                  # trials on workers

prepare_digits (scikit-learn's bundled 8x8 digits) -> `tune_lightning`, a tuning pipeline
built by `headwater.hpo.tune` around `train_lightning`: round 1 tries `trials_per_round`
quasi-random settings of the learning rate `lr`, `weight_decay` and the network `width` in
parallel; each later round tries the settings a BoTorch model fitted on every earlier trial
expects to be best. The outputs are the best parameters (`best_parameters`) and their
validation accuracy (`best_objective`); each round's `complete-trials` task writes a
Markdown report of every trial.

Rounds are unrolled when the pipeline is built: it holds MAX_ROUNDS of them, and a run with
`--param rounds=N` (N <= MAX_ROUNDS) starts trials in the first N only.
"""

from typing import NamedTuple

from kfp import dsl

from headwater.components.torch import prepare_digits, train_lightning
from headwater.hpo import tune

MODULE = "headwater.components.torch.digits:DigitsClassifier"
DATA_MODULE = "headwater.components.torch.digits:DigitsDataModule"
MAX_ROUNDS = 8
SEARCH_SPACE = [
    {"name": "lr", "bounds": [1e-4, 0.1], "parameter_type": "float", "scaling": "log"},
    {"name": "weight_decay", "bounds": [1e-6, 1e-2], "parameter_type": "float", "scaling": "log"},
    {"name": "width", "bounds": [4, 64], "parameter_type": "int", "scaling": "log"},
]

tune_lightning = tune(
    train_lightning,
    SEARCH_SPACE,
    "val_acc",
    rounds=3,
    trials_per_round=4,
    max_rounds=MAX_ROUNDS,
    train_args={"module": MODULE, "data_module": DATA_MODULE, "objective": "val_acc"},
    inputs=["data", "trainer_args"],
    name="tune-lightning",
)


@dsl.pipeline(name="tune-digits")
def tune_digits(
    rounds: int = 3,
    trials_per_round: int = 4,
    trainer_args: dict = {
        "max_epochs": 5,
        "enable_model_summary": False,
        "enable_progress_bar": False,
    },
) -> NamedTuple("Outputs", [("best_parameters", dict), ("best_objective", float)]):
    data = prepare_digits(seed=0)
    tuned = tune_lightning(
        rounds=rounds,
        trials_per_round=trials_per_round,
        data=data.outputs["data"],
        trainer_args=trainer_args,
    )
    outputs = NamedTuple("Outputs", [("best_parameters", dict), ("best_objective", float)])  # noqa: UP014
    return outputs(tuned.outputs["best_parameters"], tuned.outputs["best_objective"])
