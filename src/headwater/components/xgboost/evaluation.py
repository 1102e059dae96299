"""Score a binary classifier on a Parquet test split, here or with distributed predictions.

On one machine with no cluster named, the split is read and predicted a piece at a time in
this process. On a cluster, predictions are made where the data are
(`xgboost.dask.inplace_predict`) and never gathered:
each partition reduces its scores to counts in `BINS` equal-width bins of the predicted
probability, per class, plus its log loss and confusion counts; the sums of those are all the
metrics need, so memory stays flat whatever the size of the test split. Accuracy, precision,
recall, F1, log loss and the confusion matrix are exact. AUC and the ROC curve come from the
binned counts: scores that share a bin count as ties, which moves the AUC by at most the
share of (positive, negative) pairs within one bin, 0.5 * sum(pos_b * neg_b) / (P * N),
reported as `auc_max_error` (typically below 1e-5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.components.data import _backend
from headwater.components.xgboost import _library, _splits
from headwater.errors import InvalidArgumentError, UserError
from headwater.models import xgboost_file

BINS = 1 << 16
#: About how many points the ROC curve keeps (KFP's UI draws every point it is given).
ROC_POINTS = 200
_EPS = 1e-15  # log loss clips probabilities to [eps, 1 - eps], as scikit-learn did


@dataclass
class Evaluation:
    """What `evaluate_classifier` measured.

    Attributes:
        metrics: auc, accuracy, log_loss, precision, recall, f1 (at `threshold`), rows,
            positives and auc_max_error.
        confusion_matrix: `[[tn, fp], [fn, tp]]`: rows are the true class, columns the
            predicted one, in the order of `categories`.
        categories: The class names, ["0", "1"].
        roc: `{"fpr": [...], "tpr": [...], "thresholds": [...]}`, thinned to ~ROC_POINTS.
    """

    metrics: dict[str, float]
    confusion_matrix: list[list[int]]
    categories: list[str] = field(default_factory=lambda: ["0", "1"])
    roc: dict[str, list[float]] = field(default_factory=dict)

    @property
    def auc(self) -> float:
        return self.metrics["auc"]


def evaluate_classifier(
    model: str,
    test: str,
    *,
    label: str = "label",
    threshold: float = 0.5,
    client: Any = None,
) -> Evaluation:
    """Predict `test` with the binary classifier at `model` and measure it.

    Args:
        model: A Model artifact from `train_xgboost` (a directory with model.ubj), or an
            XGBoost model file.
        test: The test split, a Parquet dataset with the label and the model's features.
        label: The label column, holding 0 and 1.
        threshold: Probability at or above which a row is predicted positive.
        client: A `distributed.Client`; None: in this process on one machine (nothing names
            a cluster, no GPU), else `headwater.compute.get_client()`.

    Returns:
        The metrics, confusion matrix and ROC curve.

    Raises:
        UserError: The model is not an XGBoost model or not a binary classifier; the test
            split is missing or empty, lacks the label or a feature, has a non-numeric
            column, has labels other than 0 and 1, or holds only one class.
        InvalidArgumentError: `threshold` is not between 0 and 1.
    """
    if not 0 < threshold < 1:
        raise InvalidArgumentError(f"threshold must be between 0 and 1, got {threshold!r}")
    booster = xgboost_file.load(model)
    objective = _objective(booster)
    if not objective.startswith("binary:") or objective == "binary:hinge":
        raise UserError(
            f"model {model!r} has objective {objective!r}; evaluate_classifier scores binary "
            "classifiers that predict probabilities (binary:logistic)"
        )
    features = list(booster.feature_names or [])
    if not features:
        raise UserError(f"model {model!r} records no feature names; train it on a DataFrame")
    split = _splits.open_split("test", test, label, features)
    _check_label_range(split)
    where = _backend.plan(client, None, test)
    if where.local:  # one machine, no cluster named: predict here, a piece at a time
        booster.set_param({"device": "cpu"})
        return summarize(_counts_here(booster, split, threshold), test)
    client, backend = where.client, where.backend
    booster.set_param({"device": "cuda" if backend == "cudf" else "cpu"})
    dxgb = _library.xgboost_dask()
    from dask.delayed import delayed

    workers = len(client.scheduler_info(n_workers=-1).get("workers", {})) or 1
    cut = _splits.pieces(split, workers)
    x = _splits.frame(split, cut, backend, features)
    y = _splits.frame(split, cut, backend, [label])[label]
    with client.as_current():
        scores = dxgb.inplace_predict(client, booster, x)
        partials = [
            delayed(partial_counts)(p, t, threshold)
            for p, t in zip(scores.to_delayed(), y.to_delayed(), strict=True)
        ]
        total = delayed(_sum)(partials)
        (counts,) = _backend.compute(total, client=client)
    return summarize(counts, test)


def _counts_here(booster: Any, split: _splits.Split, threshold: float) -> dict[str, Any]:
    """`partial_counts` of each piece of the split (about a file each), predicted in this
    process: memory stays near one piece, as on the cluster."""
    columns = [*split.features, split.label]
    parts = []
    for piece in _splits.pieces(split, 1):
        frame = _splits.read_piece(piece, split.dataset.fs, "pandas", columns)
        scores = booster.inplace_predict(frame[list(split.features)])
        parts.append(partial_counts(scores, frame[split.label], threshold))
    return _sum(parts)


def _objective(booster: Any) -> str:
    import json

    config = json.loads(booster.save_config())
    return str(config.get("learner", {}).get("objective", {}).get("name", "unknown"))


def _check_label_range(split: _splits.Split) -> None:
    lo, hi = split.dataset.minimum.get(split.label), split.dataset.maximum.get(split.label)
    if (lo is not None and lo < 0) or (hi is not None and hi > 1):
        raise UserError(
            f"label column {split.label!r} of the test split {split.dataset.url!r} holds values "
            f"from {lo} to {hi}; a binary classifier's labels are 0 and 1"
        )


def _host(values: Any) -> Any:
    """A NumPy float64 array of a pandas/cuDF series or a NumPy/CuPy array."""
    import numpy as np

    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    elif hasattr(values, "get"):  # CuPy
        values = values.get()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def partial_counts(scores: Any, labels: Any, threshold: float) -> dict[str, Any]:
    """One partition's binned scores per class, log loss sum and confusion counts."""
    import numpy as np

    p, y = _host(scores), _host(labels)
    if p.shape != y.shape:
        raise UserError(f"{len(p)} predictions for {len(y)} labels in one partition")
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise UserError(
            f"the label column holds values other than 0 and 1 (such as {float(y[bad][0]):g}, "
            f"{int(bad.sum())} rows); a binary classifier's labels are 0 and 1"
        )
    positive = y == 1.0
    index = np.minimum((p * BINS).astype(np.int64), BINS - 1)
    clipped = np.clip(p, _EPS, 1 - _EPS)
    predicted = p >= threshold
    return {
        "pos": np.bincount(index[positive], minlength=BINS),
        "neg": np.bincount(index[~positive], minlength=BINS),
        "log_loss": float(-np.sum(np.where(positive, np.log(clipped), np.log1p(-clipped)))),
        "tp": int(np.sum(predicted & positive)),
        "fp": int(np.sum(predicted & ~positive)),
        "fn": int(np.sum(~predicted & positive)),
        "tn": int(np.sum(~predicted & ~positive)),
    }


def _sum(parts: list[dict[str, Any]]) -> dict[str, Any]:
    total = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            total[key] = total[key] + value
    return total


def summarize(counts: dict[str, Any], test: str = "the test split") -> Evaluation:
    """The metrics, confusion matrix and ROC curve from the summed `partial_counts`."""
    import numpy as np

    pos, neg = counts["pos"].astype(np.float64), counts["neg"].astype(np.float64)
    n_pos, n_neg = float(pos.sum()), float(neg.sum())
    if n_pos == 0 or n_neg == 0:
        only = "1" if n_neg == 0 else "0"
        raise UserError(
            f"{test!r} holds only label {only} rows; AUC and the ROC curve need both classes"
        )
    neg_below = np.cumsum(neg) - neg
    auc = float(np.sum(pos * (neg_below + 0.5 * neg)) / (n_pos * n_neg))
    auc_error = float(0.5 * np.sum(pos * neg) / (n_pos * n_neg))
    tp, fp, fn, tn = (int(counts[k]) for k in ("tp", "fp", "fn", "tn"))
    rows = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    metrics = {
        "auc": auc,
        "accuracy": (tp + tn) / rows,
        "log_loss": counts["log_loss"] / rows,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "rows": float(rows),
        "positives": n_pos,
        "auc_max_error": auc_error,
    }
    return Evaluation(metrics, [[tn, fp], [fn, tp]], roc=roc_curve(pos, neg))


def roc_curve(pos: Any, neg: Any, points: int = ROC_POINTS) -> dict[str, list[float]]:
    """The ROC curve of binned counts (ascending score), thinned to about `points` points.

    Points are kept evenly along the curve's length (in fpr + tpr), so steep and flat stretches
    keep their shape; the ends (0, 0) and (1, 1) are always kept.
    """
    import numpy as np

    # Thresholds from high to low: bin b's lower edge admits every score in bins >= b.
    tps = np.concatenate([[0.0], np.cumsum(pos[::-1])]) / pos.sum()
    fps = np.concatenate([[0.0], np.cumsum(neg[::-1])]) / neg.sum()
    edges = np.concatenate([[1.0], np.arange(len(pos) - 1, -1, -1) / len(pos)])
    moved = np.concatenate([[True], (np.diff(tps) > 0) | (np.diff(fps) > 0)])
    tps, fps, edges = tps[moved], fps[moved], edges[moved]
    along = tps + fps
    keep = np.unique(
        np.concatenate(
            [
                np.searchsorted(along, np.linspace(0, along[-1], points), side="left"),
                [0, len(along) - 1],
            ]
        ).clip(0, len(along) - 1)
    )
    return {
        "fpr": [round(float(v), 6) for v in fps[keep]],
        "tpr": [round(float(v), 6) for v in tps[keep]],
        "thresholds": [round(float(v), 6) for v in edges[keep]],
    }
