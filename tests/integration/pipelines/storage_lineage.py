"""Three steps for lineage, metrics and run deletion: make a dataset, train (param lr), evaluate.

The model's accuracy is `1 - lr`, logged by `evaluate` to a Metrics artifact.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output


@dsl.component
def make_dataset(rows: int, dataset: Output[Dataset]):
    with open(dataset.path, "w") as f:
        f.write("\n".join(f"row-{i}" for i in range(rows)))
    dataset.metadata["rows"] = rows


@dsl.component
def train(data: Input[Dataset], lr: float, model: Output[Model]):
    with open(data.path) as f:
        rows = len(f.read().splitlines())
    with open(model.path, "w") as f:
        f.write(f"weights rows={rows} lr={lr}")
    model.metadata["lr"] = lr


@dsl.component
def evaluate(model: Input[Model], metrics: Output[Metrics]) -> str:
    with open(model.path) as f:
        weights = f.read()
    metrics.log_metric("accuracy", round(1 - model.metadata["lr"], 6))
    metrics.log_metric("loss", 0.5)
    return weights


@dsl.pipeline
def storage_lineage(lr: float = 0.1, rows: int = 3) -> str:
    data = make_dataset(rows=rows)
    model = train(data=data.outputs["dataset"], lr=lr)
    return evaluate(model=model.outputs["model"]).outputs["Output"]
