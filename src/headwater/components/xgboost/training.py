"""Train XGBoost on Dask from Parquet splits: `xgboost.dask` on the run's cluster, CPU or GPU.

The training split becomes a `DaskQuantileDMatrix` (the hist method's compact matrix) and the
validation split one that shares its bins (`ref=`); every worker trains on the partitions it
holds, so the splits are cut into even pieces first (see `_splits`). When every worker has a
GPU and cuDF, the data are read with cuDF and the model trains with `device="cuda"`; nothing
in the call changes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.components.data import _backend, _dataset
from headwater.components.xgboost import _library, _splits, hyperparameters
from headwater.errors import InvalidArgumentError, UserError
from headwater.models import transform, xgboost_file


@dataclass
class TrainingResult:
    """What `train_xgboost` made.

    Attributes:
        booster: The model, cut at the best iteration.
        metadata: What the Model artifact records (also written as metadata.json).
        history: `{split: {metric: [value per round]}}` for "train" and "validation".
        metrics: The final metrics at the best iteration, as `{"<split>_<metric>": value}`.
        workers: How many Dask workers trained (those holding data).
        seconds: Wall time of reading and training.
    """

    booster: Any
    metadata: dict[str, Any]
    history: dict[str, dict[str, list[float]]]
    metrics: dict[str, float] = field(default_factory=dict)
    workers: int = 0
    seconds: float = 0.0


def train_xgboost(
    train: str,
    validation: str,
    model_dir: str | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    rounds: int = 100,
    early_stopping_rounds: int | None = 10,
    label: str = "label",
    client: Any = None,
) -> TrainingResult:
    """Train a booster on `train` with early stopping on `validation`, and save it.

    Args:
        train: The training split: a Parquet dataset (directory of parts, or a file) of the
            label and numeric features.
        validation: The validation split, with the same columns.
        model_dir: Where to save the model (`headwater.models.xgboost_file` layout); None: do
            not save. When `preprocess` made `train`, its transform (`_transform.json`) goes
            into the metadata, so the served model takes the raw rows (`input_form`).
        params: XGBoost parameters over `hyperparameters.DEFAULTS` (binary logistic, hist,
            depth 8, learning rate 0.1). `device` defaults to "cuda" on GPU workers.
        rounds: The most boosting rounds.
        early_stopping_rounds: Stop when the validation metric (the last `eval_metric`) has
            not improved for this many rounds; 0 or None: train all `rounds`.
        label: The label column; every other column is a feature.
        client: A `distributed.Client`; None: `headwater.compute.get_client()`.

    Returns:
        The booster, its metadata, the training curve and the number of workers used.

    Raises:
        UserError: A split is missing or empty, lacks the label, or has a column that is not
            numeric; XGBoost failed on the data (the message says which); the training
            split's transform does not make its columns.
        InvalidArgumentError: `rounds` is not positive, or a hyperparameter XGBoost rejects
            or does not know (named).
    """
    if not isinstance(rounds, int) or rounds <= 0:
        raise InvalidArgumentError(f"rounds must be a positive integer, got {rounds!r}")
    if early_stopping_rounds is not None and (
        not isinstance(early_stopping_rounds, int) or early_stopping_rounds < 0
    ):
        raise InvalidArgumentError(
            "early_stopping_rounds must be a whole number of rounds (0: no early stopping), "
            f"got {early_stopping_rounds!r}"
        )
    started = time.perf_counter()
    dxgb = _library.xgboost_dask()
    xgb = _library.xgboost()
    train_split = _splits.open_split("train", train, label)
    features = list(train_split.features)
    form = input_form(train_split)  # before training: a bad transform file fails fast
    validation_split = _splits.open_split("validation", validation, label, features)
    full = hyperparameters.merged(params)
    if client is None:
        from headwater.compute import get_client

        client = get_client()
    # Workers import XGBoost (seconds) while this process checks the parameters.
    warming = [
        client.submit(_import_xgboost, workers=[w], pure=False)
        for w in client.scheduler_info(n_workers=-1).get("workers", {})
    ]
    gpu = _backend.choose_backend(client, None) == "cudf"
    device = str(full.setdefault("device", "cuda" if gpu else "cpu"))
    if device != "cpu" and not gpu:
        raise InvalidArgumentError(
            f"hyperparameter 'device' is {device!r} but the Dask workers have no GPU with "
            "cuDF; leave 'device' out to train on whatever the workers have"
        )
    hyperparameters.check(full, features)
    backend = "cudf" if device != "cpu" else "pandas"

    # xgboost.dask looks the client up as Dask's current one, which a client made with
    # set_as_default=False (headwater.compute.cluster) is not.
    with client.as_current():
        client.gather(warming)
        output, used = _train(
            dxgb,
            client,
            full,
            train_split,
            validation_split,
            rounds,
            early_stopping_rounds,
            backend,
        )
    booster = output["booster"]
    history = {
        split: {metric: [float(v) for v in values] for metric, values in metrics.items()}
        for split, metrics in output["history"].items()
    }
    trained = booster.num_boosted_rounds()
    best = _best_iteration(booster, trained)
    if best + 1 < trained:
        booster = booster[: best + 1]
    meta = {
        "framework": "xgboost",
        "framework_version": xgb.__version__,
        "format": "ubj",
        "file": xgboost_file.MODEL_FILE,
        "objective": str(full.get("objective")),
        "feature_names": features,
        "label": label,
        "best_iteration": best,
        "rounds_trained": trained,
        "device": device,
        "params": {k: v for k, v in full.items() if isinstance(v, str | int | float | bool)},
        "train_rows": train_split.rows,
        "validation_rows": validation_split.rows,
        "workers": used,
        **form,
    }
    final = {
        f"{split}_{metric}": values[best]
        for split, metrics in history.items()
        for metric, values in metrics.items()
        if len(values) > best
    }
    booster.set_attr(best_iteration=str(best))
    if model_dir is not None:
        xgboost_file.save(booster, model_dir, meta)
    return TrainingResult(
        booster, meta, history, final, used, seconds=time.perf_counter() - started
    )


def input_form(split: _splits.Split) -> dict[str, Any]:
    """What rows the model answers, for its metadata: `{"input_form": "raw", "raw_features",
    "transform"}` when `preprocess` left its transform beside the training split (the server
    applies it to raw rows), else `{"input_form": "features"}` (rows of `feature_names`).

    Raises:
        UserError: The transform is unreadable, or its output is not the split's features
            (the split was changed after `preprocess` wrote it).
    """
    fs, path = _dataset.filesystem(split.dataset.url)
    where = f"{path.rstrip('/')}/{transform.SPEC_FILE}"
    if not fs.isdir(path) or not fs.exists(where):
        return {"input_form": "features"}
    with fs.open(where, "r") as fh:
        spec = transform.loads(fh.read(), where=f"{split.name} split's {transform.SPEC_FILE}")
    if spec.outputs != split.features:
        raise UserError(
            f"{split.name} split {split.dataset.url!r} has the columns "
            f"{transform.describe(split.features)}, but its {transform.SPEC_FILE} makes "
            f"{transform.describe(spec.outputs)}: rerun preprocess, or delete that file to "
            "train a model that takes rows of its features as they are"
        )
    return {
        "input_form": "raw",
        "raw_features": list(spec.inputs),
        "transform": spec.to_json(),
    }


def _train(
    dxgb: Any,
    client: Any,
    params: dict[str, Any],
    train_split: _splits.Split,
    validation_split: _splits.Split,
    rounds: int,
    early_stopping_rounds: int | None,
    backend: str,
) -> tuple[dict[str, Any], int]:
    """`xgboost.dask.train` on the two splits: (its output, the number of workers used)."""
    xgb = _library.xgboost()
    features, label = list(train_split.features), train_split.label
    info = client.scheduler_info(n_workers=-1).get("workers", {})
    workers = len(info) or 1
    threads = _threads(info)
    if threads is not None:
        params = {**params, "nthread": threads}
    matrices: list[Any] = []
    for split in (train_split, validation_split):
        cut = _splits.pieces(split, workers)
        x = _splits.placed(split, cut, backend, features, client)
        y = _splits.placed(split, cut, backend, [label], client)[label]
        ref = {"ref": matrices[0]} if matrices else {}
        matrices.append(
            dxgb.DaskQuantileDMatrix(
                client, x, y, max_bin=params.get("max_bin"), feature_names=features, **ref
            )
        )
    dtrain, dvalid = matrices
    try:
        output = dxgb.train(
            client,
            params,
            dtrain,
            num_boost_round=rounds,
            evals=[(dtrain, "train"), (dvalid, "validation")],
            early_stopping_rounds=early_stopping_rounds or None,
            verbose_eval=False,
        )
    except xgb.core.XGBoostError as exc:
        raise UserError(
            f"XGBoost failed training on {train_split.dataset.url!r}: "
            f"{hyperparameters.reason(str(exc))}"
        ) from exc
    return output, len(set(dtrain.worker_map) | set(dvalid.worker_map))


def _threads(workers: dict[str, Any]) -> int | None:
    """OpenMP threads per worker: the cores each advertises (its `CPU` resource, as Headwater's
    own clusters do) when fewer than its Dask threads, else None (XGBoost takes the threads).

    Headwater's LocalCluster gives a worker two threads per core, as tasks wait on I/O; OpenMP
    threads that outnumber the cores only take turns on them (and fare worse than one thread
    per core when other processes load the machine).
    """
    cores = [w.get("resources", {}).get("CPU") for w in workers.values()]
    threads = [int(w.get("nthreads") or 0) for w in workers.values()]
    if not cores or any(c is None for c in cores):
        return None
    fewest = max(1, int(min(cores)))
    return fewest if fewest < min(threads) else None


def _import_xgboost() -> None:
    import xgboost.dask  # noqa: F401


def _best_iteration(booster: Any, trained: int) -> int:
    """The booster's best iteration (early stopping sets it), else its last."""
    text = booster.attr("best_iteration")
    return int(text) if text is not None else trained - 1
