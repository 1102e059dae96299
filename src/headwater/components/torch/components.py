"""The PyTorch functions as KFP components: thin wrappers that compile to portable IR.

Each body imports and calls the plain function, so the same IR runs under `headwater run`
(local, or `--executor dask`, where a DDP job's replicas run on separate workers) and on
Kubeflow or Vertex AI Pipelines given an image with Headwater installed: set
`HEADWATER_COMPONENT_IMAGE` when compiling (default `python:3.11-slim`, which installs
`headwater[torch]` at start).
"""

# No `from __future__ import annotations`: KFP reads the parameter annotations as objects.
from typing import Optional

from kfp.dsl import HTML, Artifact, ClassificationMetrics, Dataset, Input, Metrics, Model, Output

from headwater.components._component import component

#: What a pod without Headwater installs first (Headwater checks it is installed instead).
PACKAGES = ["headwater[torch]"]


@component(packages_to_install=PACKAGES)
def prepare_digits(
    data: Output[Dataset],
    test_fraction: float = 0.2,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> int:
    """scikit-learn's bundled 8x8 digits (no download) split into train, validation and test
    as `digits.npz` (x_* float32 (N, 1, 8, 8) in [0, 1], y_* int64), for
    `headwater.components.torch.digits:DigitsDataModule`. Returns the training examples."""
    from headwater.components.torch.digits_data import prepare

    sizes = prepare(data.path, test_fraction=test_fraction, val_fraction=val_fraction, seed=seed)
    data.metadata.update({"format": "npz", "file": "digits.npz", **sizes})
    return sizes["train"]


@component(packages_to_install=PACKAGES)
def train_lightning(
    module: str,
    model: Output[Model],
    checkpoint: Output[Artifact],
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    tensorboard: Output[Artifact],
    profile_trace: Output[Artifact],
    profile_summary: Output[HTML],
    data_module: str = "",
    code: Optional[Input[Artifact]] = None,  # noqa: UP045  (KFP reads Optional)
    data: Optional[Input[Dataset]] = None,  # noqa: UP045
    module_args: dict = {},  # type: ignore[type-arg]  # noqa: B006  (KFP reads a literal)
    data_module_args: dict = {},  # type: ignore[type-arg]  # noqa: B006
    trainer_args: dict = {"max_epochs": 10},  # type: ignore[type-arg]  # noqa: B006
    hyperparameters: dict = {},  # type: ignore[type-arg]  # noqa: B006
    objective: str = "val_acc",
    replicas: int = 1,
    seed: int = 0,
) -> float:
    """Train a LightningModule on a LightningDataModule with PyTorch Lightning.

    `module` and `data_module` are `"package.module:Class"` paths, or class names in the
    Python file `code`. `data` (a Dataset) reaches the data module as `data_path`.
    `hyperparameters` (a trial's parameters) are merged over `module_args`. `trainer_args`
    go to Lightning's Trainer (`max_epochs`, `precision`, `accelerator` ("cpu" by default;
    "auto" takes a GPU when the task has one), `strategy`, `profiler`, ...);
    `profiler="pytorch"` profiles a few steps into `profile_trace` (trace.json.gz, for
    ui.perfetto.dev) and `profile_summary`. `replicas > 1` trains with DDP in that many
    processes (a PyTorchJob: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK).

    Returns the last value of the logged metric `objective` ("" for none: 0.0).
    """
    import os

    from headwater.components.torch.training import TrainSpec, train

    os.makedirs(tensorboard.path, exist_ok=True)
    os.makedirs(profile_trace.path, exist_ok=True)
    trace = os.path.join(profile_trace.path, "trace.json.gz")
    result = train(
        TrainSpec(
            module=module,
            data_module=data_module,
            code_path=code.path if code is not None else None,
            data_path=data.path if data is not None else None,
            module_args=module_args,
            data_module_args=data_module_args,
            trainer_args=trainer_args,
            hyperparameters=hyperparameters,
            objective=objective,
            seed=seed,
            model_dir=model.path,
            checkpoint_path=checkpoint.path,
            tensorboard_dir=tensorboard.path,
            trace_path=trace,
            summary_path=profile_summary.path,
        ),
        replicas=replicas,
    )
    for key in (
        "framework",
        "framework_version",
        "lightning_version",
        "class_path",
        "task",
        "device",
    ):
        if result.model.get(key) is not None:
            model.metadata[key] = result.model[key]
    for key in ("input", "output", "classes", "module_args", "torchscript"):
        if result.model.get(key) is not None:
            model.metadata[key] = result.model[key]
    model.metadata["replicas"] = result.replicas
    checkpoint.metadata["format"] = "lightning-checkpoint"
    tensorboard.metadata["format"] = "tensorboard-logs"
    if os.path.exists(trace):
        profile_trace.metadata.update({"format": "chrome-trace", "file": "trace.json.gz"})
    from headwater.step_metrics import log_series

    # Each epoch's values over steps (drawn by Headwater's UI); the final values after them.
    for name, points in sorted(result.history.items()):
        log_series(metrics, name, [p[1] for p in points], steps=[int(p[0]) for p in points])
    for name, value in result.metrics.items():
        metrics.log_metric(name, value)
    scored = result.classification
    if scored is not None:
        classification.log_confusion_matrix(scored["categories"], scored["confusion_matrix"])
        if scored.get("roc"):
            roc = scored["roc"]
            classification.log_roc_curve(roc["fpr"], roc["tpr"], roc["thresholds"])
    return float(result.objective) if result.objective is not None else 0.0


@component(packages_to_install=PACKAGES)
def evaluate_lightning(
    model: Input[Model],
    data_module: str,
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    data: Optional[Input[Dataset]] = None,  # noqa: UP045
    code: Optional[Input[Artifact]] = None,  # noqa: UP045
    data_module_args: dict = {},  # type: ignore[type-arg]  # noqa: B006
    split: str = "test",
) -> float:
    """Score `model` on a split of the data module: accuracy and the confusion matrix (ROC
    for two classes) for classifiers, else MSE and MAE. Returns the accuracy (classifiers)
    or the mean squared error."""
    from headwater.components.torch.evaluation import evaluate

    found = evaluate(
        model.path,
        data_module,
        data_module_args=data_module_args,
        data_path=data.path if data is not None else None,
        code_path=code.path if code is not None else None,
        split=split,
    )
    for name, value in found.metrics.items():
        metrics.log_metric(name, value)
    scored = found.classification
    if scored is None:
        return float(found.metrics[f"{split}_mse"])
    classification.log_confusion_matrix(scored.categories, scored.confusion_matrix)
    if scored.roc:
        classification.log_roc_curve(scored.roc["fpr"], scored.roc["tpr"], scored.roc["thresholds"])
    return float(scored.accuracy)


@component(packages_to_install=PACKAGES)
def explain_model(
    model: Input[Model],
    examples: Input[Dataset],
    attributions: Output[Dataset],
    report: Output[HTML],
    method: str = "integrated_gradients",
    n_steps: int = 50,
    max_examples: int = 16,
) -> int:
    """Captum attributions for `model` on up to `max_examples` of `examples` (.npy, .npz or
    JSON): Integrated Gradients (or "occlusion"). `attributions` holds attributions.csv (one
    row per example and feature), attributions.json and, for images, a heatmap per example;
    `report` shows them. Returns the number of examples explained."""
    import os
    import shutil

    from headwater.components.torch.explain import explain_model as explain

    found = explain(
        model.path,
        examples.path,
        attributions.path,
        method=method,
        n_steps=n_steps,
        max_examples=max_examples,
    )
    attributions.metadata.update({"method": method, "examples": len(found.predictions)})
    page = os.path.join(attributions.path, "index.html")
    if os.path.exists(page):
        shutil.copyfile(page, report.path)
    return len(found.predictions)


@component(packages_to_install=PACKAGES)
def pytorch_job(
    function: str,
    output: Output[Artifact],
    replicas: int = 2,
    args: dict = {},  # type: ignore[type-arg]  # noqa: B006
    code: Optional[Input[Artifact]] = None,  # noqa: UP045
    data: Optional[Input[Dataset]] = None,  # noqa: UP045
) -> dict:  # type: ignore[type-arg]
    """Run `function` in `replicas` processes at once, as a Kubeflow PyTorchJob runs its pods:
    each replica sees MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK (master = rank 0), so
    `torch.distributed.init_process_group()` rendezvous with no arguments. `function` is
    `"package.module:function"` or a function name in the Python file `code`; it gets `args`
    as keyword arguments plus `output_path` (rank 0 writes the job's output there) and
    `data_path` when `data` is given. If one replica fails, the others are stopped and the job
    fails. Returns rank 0's return value (a dict, or {"result": value})."""
    from headwater.components.torch import job

    kwargs = dict(args)
    kwargs["output_path"] = output.path
    if data is not None:
        kwargs["data_path"] = data.path
    target = function
    files = [data.path] if data is not None else []
    if code is not None:
        target = f"{code.path}:{function.rpartition(':')[2]}"
        files.append(code.path)
    found = job.launch(target, kwargs, replicas, files=files)
    return found if isinstance(found, dict) else {"result": found}
