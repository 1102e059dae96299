"""Classifier metrics from logits: checked against scikit-learn on the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from headwater.components.torch.classification import classify, is_classification, roc_curve

sklearn_metrics = pytest.importorskip("sklearn.metrics")


def test_multiclass_confusion_matrix_and_accuracy_match_sklearn() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 4))
    labels = rng.integers(0, 4, size=200)
    scored = classify(logits, labels, ["a", "b", "c", "d"])
    predicted = logits.argmax(axis=1)
    assert scored.categories == ["a", "b", "c", "d"]
    assert scored.confusion_matrix == sklearn_metrics.confusion_matrix(labels, predicted).tolist()
    assert scored.accuracy == pytest.approx(sklearn_metrics.accuracy_score(labels, predicted))
    assert scored.roc is None and scored.auc is None


@pytest.mark.parametrize("shape", ["two-columns", "one-logit"])
def test_binary_roc_and_auc_match_sklearn(shape: str) -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, size=300)
    margin = labels * 1.5 + rng.normal(size=300)
    logits = np.stack([-margin, margin], axis=1) / 2 if shape == "two-columns" else margin
    scored = classify(logits, labels)
    positive = 1 / (1 + np.exp(-margin))
    assert scored.auc == pytest.approx(sklearn_metrics.roc_auc_score(labels, positive))
    fpr, tpr, _ = sklearn_metrics.roc_curve(labels, positive, drop_intermediate=False)
    assert scored.roc is not None
    assert np.allclose(scored.roc["fpr"], fpr) and np.allclose(scored.roc["tpr"], tpr)
    assert scored.categories == ["0", "1"]


def test_ties_make_one_point_per_distinct_score() -> None:
    fpr, tpr, thresholds = roc_curve([0, 1, 1, 0], [0.5, 0.5, 0.9, 0.1])
    assert thresholds == [1.0, 0.9, 0.5, 0.1]
    assert tpr == [0.0, 0.5, 1.0, 1.0] and fpr == [0.0, 0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("logits", "labels", "expected"),
    [
        (np.zeros((3, 5)), np.array([0, 4, 2]), True),
        (np.zeros((3, 5)), np.array([0, 5, 2]), False),  # a label past the classes
        (np.zeros((3, 5)), np.array([0.5, 1.0, 2.0]), False),  # regression targets
        (np.zeros((3, 2, 2)), np.array([0, 1, 1]), False),  # not one score per class
        (np.zeros(3), np.array([0, 1, 1]), True),  # one logit, binary labels
    ],
    ids=["classes", "label-out-of-range", "float-targets", "3d-output", "binary-logit"],
)
def test_what_counts_as_a_classifier(
    logits: np.ndarray, labels: np.ndarray, expected: bool
) -> None:
    assert is_classification(logits, labels) is expected
