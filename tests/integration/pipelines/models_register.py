"""Train a tiny model, evaluate it, and register it in the run's model registry."""

from kfp import dsl
from kfp.dsl import Input, Metrics, Model, Output

from headwater.components.registry import register_model


@dsl.component
def train(model: Output[Model], seed: int):
    with open(model.path, "w") as f:
        f.write(f"weights-{seed}")
    model.metadata["framework"] = "toy"


@dsl.component
def evaluate(model: Input[Model], metrics: Output[Metrics]):
    with open(model.path) as f:
        metrics.log_metric("auc", 0.5 + len(f.read()) / 100)


@dsl.pipeline
def p(seed: int = 1, stage: str = "production") -> int:
    trained = train(seed=seed)
    scored = evaluate(model=trained.outputs["model"])
    registered = register_model(
        model=trained.outputs["model"],
        name="toy",
        metrics={"data": "toy-v1"},
        metrics_artifact=scored.outputs["metrics"],
        stage=stage,
    )
    return registered.outputs["version"]
