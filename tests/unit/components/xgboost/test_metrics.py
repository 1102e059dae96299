"""The evaluation's metrics from binned counts, against scikit-learn on the same scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from headwater.components.xgboost import evaluation
from headwater.errors import UserError


def _scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.45).astype(np.int8)
    p = 1 / (1 + np.exp(-(rng.normal(0, 1.2, n) + 1.1 * (y - 0.5))))
    return p.astype(np.float32), y


def _evaluate(p: np.ndarray, y: np.ndarray, parts: int = 3) -> evaluation.Evaluation:
    chunks = [
        evaluation.partial_counts(pd.Series(a), pd.Series(b), 0.5)
        for a, b in zip(np.array_split(p, parts), np.array_split(y, parts), strict=True)
    ]
    return evaluation.summarize(evaluation._sum(chunks))


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_the_metrics_match_scikit_learn(seed: int) -> None:
    p, y = _scores(5000, seed)
    got = _evaluate(p, y)
    m = got.metrics
    exact = skm.roc_auc_score(y, p)
    assert abs(m["auc"] - exact) <= m["auc_max_error"] + 1e-12
    assert m["auc_max_error"] < 1e-4
    predicted = p >= 0.5
    assert m["accuracy"] == pytest.approx(skm.accuracy_score(y, predicted), abs=1e-12)
    assert m["precision"] == pytest.approx(skm.precision_score(y, predicted), abs=1e-12)
    assert m["recall"] == pytest.approx(skm.recall_score(y, predicted), abs=1e-12)
    assert m["f1"] == pytest.approx(skm.f1_score(y, predicted), abs=1e-12)
    assert m["log_loss"] == pytest.approx(skm.log_loss(y, p.astype(np.float64)), rel=1e-9)
    assert got.confusion_matrix == skm.confusion_matrix(y, predicted).tolist()
    assert (m["rows"], m["positives"]) == (5000, y.sum())


def test_the_roc_curve_is_thinned_and_follows_scikit_learns() -> None:
    p, y = _scores(20_000, 3)
    roc = _evaluate(p, y).roc
    fpr, tpr = np.array(roc["fpr"]), np.array(roc["tpr"])
    assert 150 <= len(fpr) <= evaluation.ROC_POINTS + 2
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0, 0, 1, 1)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert np.all(np.diff(roc["thresholds"]) <= 0)
    # Every kept point lies on scikit-learn's curve (to the bin width).
    sk_fpr, sk_tpr, _ = skm.roc_curve(y, p)
    assert np.max(np.abs(np.interp(fpr, sk_fpr, sk_tpr) - tpr)) < 0.01
    assert np.trapezoid(tpr, fpr) == pytest.approx(skm.roc_auc_score(y, p), abs=2e-3)


def test_labels_other_than_0_and_1_are_named() -> None:
    with pytest.raises(UserError, match=r"holds values other than 0 and 1 \(such as 2, 1 rows"):
        evaluation.partial_counts(pd.Series([0.2, 0.7, 0.9]), pd.Series([0, 1, 2]), 0.5)


def test_a_test_split_of_one_class_is_refused() -> None:
    counts = evaluation.partial_counts(pd.Series([0.2, 0.7]), pd.Series([1, 1]), 0.5)
    with pytest.raises(UserError, match=r"holds only label 1 rows; AUC and the ROC curve need"):
        evaluation.summarize(counts, "test/")
