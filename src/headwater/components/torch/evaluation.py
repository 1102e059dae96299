"""Score a trained PyTorch model on a data module's split: the work of `evaluate_lightning`.

Classifiers (one score per class, integer labels) get accuracy, the confusion matrix and,
with two classes, ROC and AUC; other models get mean squared and absolute error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.components.torch import _library
from headwater.components.torch.classification import Classification, classify, is_classification
from headwater.errors import InvalidArgumentError, UserError
from headwater.loading import load_class
from headwater.models import torch_file

SPLITS = ("test", "val", "train")


@dataclass
class Evaluation:
    """The metrics of one split; `classification` for classifiers."""

    split: str
    metrics: dict[str, float]
    classification: Classification | None


def evaluate(
    model_path: str,
    data_module: str,
    *,
    data_module_args: dict[str, Any] | None = None,
    data_path: str | None = None,
    code_path: str | None = None,
    split: str = "test",
) -> Evaluation:
    """Run the Model artifact at `model_path` over `split` of the data module and score it.

    Args:
        model_path: A Model artifact written by `train_lightning` (or a TorchScript file).
        data_module: `"pkg.mod:Class"`, or the class name in `code_path`.
        data_module_args: Keyword arguments for the data module.
        data_path: A Dataset artifact's path, given to the data module as `data_path`.
        code_path: The Python file holding the data module, when it is not importable.
        split: "test", "val" or "train".

    Raises:
        UserError: A split the data module lacks, batches that are not (inputs, targets),
            inputs whose shape the model rejects.
    """
    if split not in SPLITS:
        raise InvalidArgumentError(f"split must be one of {', '.join(SPLITS)} (got {split!r})")
    torch = _library.torch()
    _library.lightning()
    import numpy as np

    model = torch_file.load(model_path)
    cls = load_class(data_module, code_path, role="LightningDataModule")
    kwargs = dict(data_module_args or {})
    if data_path:
        kwargs.setdefault("data_path", data_path)
    try:
        datamodule = cls(**kwargs)
    except TypeError as exc:
        raise UserError(
            f"{data_module!r} rejects data_module_args {sorted(kwargs)}: {exc}"
        ) from exc
    datamodule.prepare_data()
    datamodule.setup({"val": "validate", "train": "fit"}.get(split, split))
    try:
        loader = getattr(datamodule, f"{split}_dataloader")()
    except Exception as exc:
        raise UserError(f"{data_module!r} has no {split} split ({exc})".splitlines()[0]) from exc
    outputs, targets = [], []
    with torch.no_grad():
        for batch in loader:
            if not isinstance(batch, (list, tuple)) or len(batch) < 2:
                raise UserError(
                    f"{data_module!r}'s {split} batches are not (inputs, targets) pairs"
                )
            x, y = batch[0], batch[1]
            try:
                out = model(x)
            except RuntimeError as exc:
                said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise UserError(
                    f"the model rejected a batch of shape {tuple(x.shape)}: {said}"
                ) from exc
            outputs.append(out.detach().cpu().float().numpy())
            targets.append(y.detach().cpu().numpy())
    if not outputs:
        raise UserError(f"{data_module!r}'s {split} split is empty")
    logits, labels = np.concatenate(outputs), np.concatenate(targets)
    if is_classification(logits, labels):
        categories = torch_file.metadata(model_path).get("classes") or getattr(
            datamodule, "classes", None
        )
        scored = classify(logits, labels, list(categories) if categories else None)
        metrics = {f"{split}_{k}": v for k, v in scored.metrics.items()}
        metrics[f"{split}_examples"] = float(scored.examples)
        return Evaluation(split, metrics, scored)
    predicted = logits.reshape(len(logits), -1)
    truth = labels.reshape(len(labels), -1).astype(np.float64)
    if predicted.shape != truth.shape:
        raise UserError(
            f"outputs of shape {predicted.shape} do not match targets of shape {truth.shape}"
        )
    error = predicted - truth
    return Evaluation(
        split,
        {
            f"{split}_mse": float((error**2).mean()),
            f"{split}_mae": float(np.abs(error).mean()),
            f"{split}_examples": float(len(truth)),
        },
        None,
    )
