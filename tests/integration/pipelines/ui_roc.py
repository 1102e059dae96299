"""A tiny evaluation for the browser tests of the web UI: a confusion matrix, an ROC curve and
a metric that depend on the `shift` parameter, so two runs with different shifts differ."""

from kfp import dsl
from kfp.dsl import ClassificationMetrics, Metrics, Output


@dsl.component
def prepare(count: int) -> int:
    print(f"prepared {count} examples")
    return count


@dsl.component
def evaluate(
    count: int,
    shift: float,
    classification: Output[ClassificationMetrics],
    scores: Output[Metrics],
):
    tpr = [0.0, min(1.0, 0.5 + shift), min(1.0, 0.8 + shift), 1.0]
    fpr = [0.0, 0.2, 0.5, 1.0]
    classification.log_confusion_matrix(["cat", "dog"], [[count - 3, 3], [2, count - 2]])
    classification.log_roc_curve(fpr, tpr, [1.0, 0.7, 0.4, 0.0])
    accuracy = round(0.7 + shift, 4)
    scores.log_metric("accuracy", accuracy)
    print(f"evaluated {count} examples: accuracy {accuracy}")


@dsl.pipeline
def ui_roc(count: int = 20, shift: float = 0.1):
    prepared = prepare(count=count)
    evaluate(count=prepared.output, shift=shift)
