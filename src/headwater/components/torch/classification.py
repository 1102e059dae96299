"""Classifier metrics from a model's outputs: accuracy, the confusion matrix and (binary) ROC.

Pure NumPy over collected logits and labels, so training, evaluation and DDP rank 0 share it
and it works for any module whose output is one score per class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Classification:
    """What a classifier scored on one split."""

    categories: list[str]
    confusion_matrix: list[list[int]]
    accuracy: float
    examples: int
    roc: dict[str, list[float]] | None = None
    auc: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def is_classification(logits: Any, labels: Any) -> bool:
    """Whether outputs of shape (N, C>=2) or (N,)/(N, 1) scores with integer labels look like
    a classifier's (labels integral, in range for C classes)."""
    if logits.ndim not in (1, 2) or labels.ndim != 1 or len(labels) != len(logits):
        return False
    if not np.issubdtype(labels.dtype, np.integer):
        return False
    classes = logits.shape[1] if logits.ndim == 2 else 1
    top = max(classes, 2)
    return bool(len(labels)) and int(labels.min()) >= 0 and int(labels.max()) < top


def classify(logits: Any, labels: Any, categories: list[str] | None = None) -> Classification:
    """Accuracy, confusion matrix and, for two classes, the ROC curve and its AUC.

    Args:
        logits: (N, C) class scores, or (N,) / (N, 1) scores of the positive class (logits).
        labels: (N,) integer class indices.
        categories: Class names (default "0" .. "C-1").
    """
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if logits.ndim == 2 and logits.shape[1] == 1:
        logits = logits[:, 0]
    if logits.ndim == 1:
        positive = 1.0 / (1.0 + np.exp(-logits))
        predicted = (positive >= 0.5).astype(np.int64)
        n_classes = 2
    else:
        predicted = logits.argmax(axis=1)
        n_classes = logits.shape[1]
        positive = _softmax(logits)[:, 1] if n_classes == 2 else None
    names = list(categories or [])
    if len(names) != n_classes:
        names = [str(i) for i in range(n_classes)]
    matrix = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    accuracy = float((predicted == labels).mean()) if len(labels) else 0.0
    result = Classification(
        categories=names,
        confusion_matrix=matrix.tolist(),
        accuracy=accuracy,
        examples=len(labels),
        metrics={"accuracy": accuracy},
    )
    if positive is not None:
        fpr, tpr, thresholds = roc_curve(labels, positive)
        result.roc = {"fpr": fpr, "tpr": tpr, "thresholds": thresholds}
        result.auc = float(np.trapezoid(tpr, fpr))
        result.metrics["auc"] = result.auc
    return result


def roc_curve(labels: Any, scores: Any) -> tuple[list[float], list[float], list[float]]:
    """The ROC curve (false and true positive rates per distinct threshold, highest first)."""
    labels = np.asarray(labels) == 1
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="mergesort")
    scores, labels = scores[order], labels[order]
    # The last index of each run of equal scores: one point per distinct threshold.
    cut = (
        np.r_[np.flatnonzero(np.diff(scores)), len(scores) - 1]
        if len(scores)
        else np.array([], int)
    )
    tps = np.cumsum(labels)[cut] if len(cut) else np.array([])
    fps = (cut + 1) - tps
    positives = max(int(labels.sum()), 1)
    negatives = max(int(len(labels) - labels.sum()), 1)
    fpr = np.r_[0.0, fps / negatives]
    tpr = np.r_[0.0, tps / positives]
    # The first point (nothing predicted positive) sits above every score; JSON has no inf.
    thresholds = np.r_[max(1.0, float(scores[0])) if len(scores) else 1.0, scores[cut]]
    return fpr.tolist(), tpr.tolist(), [float(t) for t in thresholds]


def _softmax(logits: Any) -> Any:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)
