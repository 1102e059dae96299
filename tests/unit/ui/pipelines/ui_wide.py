"""A pipeline logging many metrics, some large and some tiny: the runs table's width and
number formats (with another pipeline's runs beside it)."""

from kfp import dsl
from kfp.dsl import Metrics, Output


@dsl.component
def train(rounds: int, scores: Output[Metrics]):
    scores.log_metric("accuracy", 0.87341)
    scores.log_metric("samples", 99510.0)
    scores.log_metric("learning_rate", 1.2e-05)
    scores.log_metric("rounds", rounds)
    for i in range(22):
        scores.log_metric(f"validation_metric_{i:02d}", 1000.0 * i + 0.5)


@dsl.pipeline(name="ui-wide")
def ui_wide(rounds: int = 100):
    train(rounds=rounds)
