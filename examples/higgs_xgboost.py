"""The flagship: Higgs data on Dask, distributed XGBoost, evaluation, and a registered model.

    headwater run examples/higgs_xgboost.py --executor dask               # a LocalCluster
    headwater run examples/higgs_xgboost.py --executor dask --scheduler tcp://HOST:8786 \\
        --pipeline-root s3://bucket/headwater --param rows=10000000       # a real cluster

generate_higgs -> preprocess -> train_xgboost -> evaluate_classifier -> (AUC > threshold)
-> register_model, with groupby_summary beside them. On GPU workers (dask-cuda) the data steps
use cuDF and XGBoost trains with device='cuda', chosen automatically; the code does not change.
The pipeline's output is the test AUC. `make demo` runs it on this machine's defaults.
"""

from kfp import dsl

from headwater.components.data import generate_higgs, groupby_summary, preprocess
from headwater.components.registry import register_model
from headwater.components.xgboost import evaluate_classifier, train_xgboost


@dsl.pipeline(name="higgs-xgboost")
def higgs_xgboost(
    rows: int = 1_000_000,
    rounds: int = 100,
    auc_threshold: float = 0.7,
    model_name: str = "higgs-xgboost",
    max_depth: int = 6,
    learning_rate: float = 0.2,
    partition_size_mb: int = 16,
) -> float:
    data = generate_higgs(rows=rows, seed=0, partition_size_mb=partition_size_mb)
    groupby_summary(data=data.outputs["data"])
    split = preprocess(data=data.outputs["data"])
    trained = train_xgboost(
        train=split.outputs["train"],
        validation=split.outputs["validation"],
        rounds=rounds,
        params={
            "objective": "binary:logistic",
            "eval_metric": ["logloss", "auc"],
            "tree_method": "hist",
            "max_depth": max_depth,
            "learning_rate": learning_rate,
        },
    )
    evaluated = evaluate_classifier(model=trained.outputs["model"], test=split.outputs["test"])
    with dsl.If(evaluated.outputs["Output"] > auc_threshold, name="good-enough"):
        register_model(
            model=trained.outputs["model"],
            name=model_name,
            metrics_artifact=evaluated.outputs["metrics"],
        )
    return evaluated.outputs["Output"]
