"""The XGBoost functions as KFP components: thin wrappers that compile to portable IR.

Each body imports and calls the plain function, so the same IR runs under `headwater run`
(local or `--executor dask`, where it trains on the run's cluster) and on Kubeflow or Vertex AI
Pipelines given an image with Headwater installed: set `HEADWATER_COMPONENT_IMAGE` when
compiling (default `python:3.11-slim`, which installs `headwater[dask,xgboost]` at start).
"""

# No `from __future__ import annotations`: KFP reads the parameter annotations as objects.
from kfp.dsl import HTML, ClassificationMetrics, Dataset, Input, Metrics, Model, Output

from headwater.components._component import component

#: What a pod without Headwater installs first (Headwater checks it is installed instead).
PACKAGES = ["headwater[dask,xgboost]"]


@component(packages_to_install=PACKAGES)
def train_xgboost(
    train: Input[Dataset],
    validation: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
    curve: Output[HTML],
    # A literal: KFP copies the function's source into the task, so no names from here.
    params: dict = {  # type: ignore[type-arg]  # noqa: B006
        "objective": "binary:logistic",
        "eval_metric": "logloss",
        "tree_method": "hist",
        "max_depth": 8,
        "learning_rate": 0.1,
        "max_bin": 256,
    },
    rounds: int = 100,
    early_stopping_rounds: int = 10,
    label: str = "label",
) -> int:
    """XGBoost on the run's Dask cluster (GPU workers: device="cuda"), early stopping on the
    validation split. The model is a directory with model.ubj (UBJSON) and metadata.json.

    Returns the number of Dask workers that trained.
    """
    from headwater.components.xgboost.curve import render
    from headwater.components.xgboost.training import train_xgboost as train_model

    result = train_model(
        train.path,
        validation.path,
        model.path,
        params=params,
        rounds=rounds,
        early_stopping_rounds=early_stopping_rounds,
        label=label,
    )
    from headwater.step_metrics import log_series

    model.metadata.update(result.metadata)
    # Every round's evaluation metrics over steps (drawn by Headwater's UI); then the final
    # values, at the best iteration (the saved model), replace the last round's.
    for split, per_metric in sorted(result.history.items()):
        for name, values in sorted(per_metric.items()):
            log_series(metrics, f"{split}_{name}", values)
    for name, value in result.metrics.items():
        metrics.log_metric(name, value)
    metrics.log_metric("best_iteration", result.metadata["best_iteration"])
    metrics.log_metric("rounds_trained", result.metadata["rounds_trained"])
    metrics.log_metric("workers", result.workers)
    metrics.log_metric("training_seconds", round(result.seconds, 3))
    best = result.metadata["best_iteration"]
    with open(curve.path, "w", encoding="utf-8") as fh:
        fh.write(render(result.history, best, "XGBoost training curve"))
    return result.workers


@component(packages_to_install=PACKAGES)
def evaluate_classifier(
    model: Input[Model],
    test: Input[Dataset],
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    label: str = "label",
    threshold: float = 0.5,
) -> float:
    """A binary classifier on the test split, predicted on the Dask cluster: AUC, accuracy,
    log loss, precision, recall and F1; the confusion matrix and ROC curve. Returns the AUC."""
    from headwater.components.xgboost.evaluation import evaluate_classifier as evaluate

    result = evaluate(model.path, test.path, label=label, threshold=threshold)
    for name, value in result.metrics.items():
        metrics.log_metric(name, value)
    classification.log_confusion_matrix(result.categories, result.confusion_matrix)
    classification.log_roc_curve(result.roc["fpr"], result.roc["tpr"], result.roc["thresholds"])
    return result.auc
