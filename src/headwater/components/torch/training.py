"""Train a LightningModule on a LightningDataModule: the work of the `train_lightning` component.

`train(spec)` builds the module and data module from their class paths (or a code file), checks
the trainer arguments against Lightning's `Trainer` (naming a key it rejects), fits, tests when
the data module has a test split, and on global rank 0 writes the Model artifact
(`headwater.models.torch_file`), the checkpoint, TensorBoard logs and, for classifiers, the
confusion matrix and ROC. `profiler="pytorch"` profiles a few steps into a Chrome/Perfetto
trace and an HTML table.

With `replicas > 1` the same function runs in every replica of a `job.launch` (the PyTorchJob
equivalent): each replica sees MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, and Lightning
trains with DDP over `num_nodes=replicas` (gloo on CPUs, NCCL on GPUs) through its
`KubeflowEnvironment`, which reads exactly those variables.
"""

from __future__ import annotations

import inspect
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from headwater.components.torch import _library
from headwater.components.torch._arguments import coerce, construct
from headwater.components.torch.classification import Classification, classify, is_classification
from headwater.errors import InvalidArgumentError, UserError
from headwater.loading import load_class
from headwater.models import torch_file

#: Trainer arguments the component sets itself (the logger writes the TensorBoard artifact).
_OWNED = ("logger", "default_root_dir", "callbacks", "plugins")


@dataclass
class TrainSpec:
    """Everything one training needs; JSON-serialisable, so replicas receive it as is."""

    module: str
    data_module: str = ""
    code_path: str | None = None
    data_path: str | None = None
    module_args: dict[str, Any] = field(default_factory=dict)
    data_module_args: dict[str, Any] = field(default_factory=dict)
    trainer_args: dict[str, Any] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    objective: str = "val_acc"
    seed: int = 0
    model_dir: str | None = None
    checkpoint_path: str | None = None
    tensorboard_dir: str | None = None
    trace_path: str | None = None
    summary_path: str | None = None


@dataclass
class TrainResult:
    """What rank 0 reports: logged metrics, the objective, the classifier's scores."""

    metrics: dict[str, float]
    objective: float | None
    model: dict[str, Any]
    classification: dict[str, Any] | None
    seconds: float
    replicas: int
    #: `{metric: [[epoch, value], ...]}`: what the module had logged at the end of each epoch.
    history: dict[str, list[list[float]]] = field(default_factory=dict)


def train(spec: TrainSpec, replicas: int = 1) -> TrainResult:
    """Train as `spec` says: in this process, or in `replicas` DDP processes (`job.launch`).

    Raises:
        InvalidArgumentError: `replicas` below 1.
        UserError: A class that cannot be found, arguments the module, data module or
            Lightning rejects (naming the key), data whose shape the model rejects, an
            objective the module does not log, a replica that fails.
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise InvalidArgumentError(
            f"replicas must be a whole number >= 1 (got {replicas!r}); 1 trains in one process"
        )
    if replicas == 1:
        return TrainResult(**fit(asdict(spec)))
    from headwater.components.torch import job

    files = [p for p in (spec.code_path, spec.data_path) if p]
    found = job.launch(
        "headwater.components.torch.training:fit",
        {"spec": asdict(spec)},
        replicas,
        files=files,
        resources=_replica_resources(spec.trainer_args),
    )
    return TrainResult(**found)


def _replica_resources(trainer_args: dict[str, Any]) -> dict[str, float]:
    accelerator = str(trainer_args.get("accelerator", "cpu"))
    return {"GPU": 1.0} if accelerator in ("gpu", "cuda") else {}


def fit(spec: dict[str, Any]) -> dict[str, Any]:
    """Train once in this process (one replica of a job when WORLD_SIZE is set).

    Returns the TrainResult's fields (JSON-serialisable); only global rank 0 writes artifacts.
    """
    started = time.monotonic()
    s = TrainSpec(**spec)
    pl = _library.lightning()
    torch = _library.torch()
    pl.seed_everything(s.seed, verbose=False)
    module_cls = load_class(s.module, s.code_path, role="LightningModule")
    if not issubclass(module_cls, pl.LightningModule):
        raise UserError(
            f"{s.module!r} is not a LightningModule (its bases: "
            f"{', '.join(b.__name__ for b in module_cls.__bases__)})"
        )
    module_args = coerce(module_cls, {**s.module_args, **s.hyperparameters})
    module = construct(module_cls, module_args, "module_args", s.module)
    datamodule = _data_module(s, pl)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    example = _preflight(module, datamodule, torch)
    history = _history_callback(pl)
    with tempfile.TemporaryDirectory(prefix="headwater-lightning-") as scratch:
        trainer = _trainer(s, pl, scratch, world, [history])
        fit_started = time.monotonic()
        try:
            trainer.fit(module, datamodule=datamodule)
        except RuntimeError as exc:
            raise _shape_error(exc, example) from exc
        fit_seconds = time.monotonic() - fit_started
        device = str(trainer.strategy.root_device)
        # What the module logged while fitting (the last epoch's values); testing replaces them.
        metrics = _scalars(trainer.callback_metrics)
        tested = _has(datamodule, module, "test_dataloader") and _has_step(module, "test_step")
        if tested:
            trainer.test(module, datamodule=datamodule, verbose=False)
            metrics.update(_scalars(trainer.callback_metrics))
        metrics["epochs"] = float(trainer.current_epoch)
        metrics["global_step"] = float(trainer.global_step)
        metrics["fit_seconds"] = round(fit_seconds, 3)
        if s.checkpoint_path:
            trainer.save_checkpoint(s.checkpoint_path)
        result: dict[str, Any] = {
            "metrics": metrics,
            "objective": None,
            "model": {},
            "classification": None,
            "seconds": 0.0,
            "replicas": world,
            "history": history.history,
        }
        if not trainer.is_global_zero:
            return result
    split = "test" if tested else "val"
    scored = _classification(module, datamodule, split, torch)
    if scored is not None:
        metrics.update({f"{split}_{k}" if k == "auc" else k: v for k, v in scored.metrics.items()})
        result["classification"] = asdict(scored)
    metrics["training_seconds"] = round(time.monotonic() - started, 3)
    if s.objective:
        if s.objective not in metrics:
            raise UserError(
                f"objective {s.objective!r} was not logged by {s.module!r} (logged: "
                f"{', '.join(sorted(metrics)) or 'nothing'}); set objective to one of them"
            )
        result["objective"] = metrics[s.objective]
    if s.model_dir:
        result["model"] = torch_file.save(
            module.cpu(),
            s.model_dir,
            class_path=s.module,
            module_args=module_args,
            example=example,
            code_path=s.code_path,
            extra={
                "lightning_version": pl.__version__,
                "device": device,
                "classes": scored.categories if scored is not None else None,
                "task": "classification" if scored is not None else None,
                "metrics": metrics,
            },
        )
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _data_module(s: TrainSpec, pl: Any) -> Any:
    if not s.data_module:
        return None
    cls = load_class(s.data_module, s.code_path, role="LightningDataModule")
    if not issubclass(cls, pl.LightningDataModule):
        raise UserError(f"{s.data_module!r} is not a LightningDataModule")
    kwargs = dict(s.data_module_args)
    if s.data_path:
        params = inspect.signature(cls).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if "data_path" not in params and not takes_any:
            raise UserError(
                f"{s.data_module!r} takes no data_path argument, but a data artifact was given: "
                "add `data_path: str` to its __init__ or drop the data input"
            )
        kwargs.setdefault("data_path", s.data_path)
    return construct(cls, kwargs, "data_module_args", s.data_module)


def _has(datamodule: Any, module: Any, hook: str) -> bool:
    """Whether the data module (else the module) really implements `hook`."""
    for owner in (datamodule, module):
        if owner is None:
            continue
        for base in type(owner).__mro__:
            if hook in vars(base):
                return not base.__module__.startswith(("lightning.", "pytorch_lightning."))
    return False


def _has_step(module: Any, hook: str) -> bool:
    return _has(None, module, hook)


def _preflight(module: Any, datamodule: Any, torch: Any) -> Any:
    """One training batch through the model before fitting: a clear error for data whose shape
    the model rejects, and an example input for the model's signature. None when the batch is
    not a tensor (or a tuple starting with one) or there is no data module."""
    if datamodule is None:
        return None
    datamodule.prepare_data()
    datamodule.setup("fit")
    try:
        batch = next(iter(datamodule.train_dataloader()))
    except StopIteration:
        raise UserError("the data module's training loader yields no batches") from None
    x = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
    if not isinstance(x, torch.Tensor):
        return None
    example = x[:1].clone()
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            module(x)
    except RuntimeError as exc:
        raise _shape_error(exc, x) from exc
    except (TypeError, NotImplementedError):
        return None  # forward takes something else; fitting will tell
    finally:
        module.train(was_training)
    return example


def _shape_error(exc: RuntimeError, example: Any) -> Exception:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    words = ("shape", "size", "mat1", "dimension", "expected input", "channels")
    if example is None or not any(w in text.lower() for w in words):
        return exc
    shape = tuple(example.shape)
    return UserError(f"the model rejected a batch of shape {shape} (batch first): {text}")


def _history_callback(pl: Any) -> Any:
    """A Lightning callback that keeps, per epoch, the scalars the module has logged by the
    end of it (`trainer.callback_metrics`) in its `history`: `{name: [[epoch, value], ...]}`.

    An epoch is read when the next one starts and when fitting ends: only then has Lightning
    aggregated the epoch's `on_epoch` values and run its validation.
    """

    class History(pl.Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.history: dict[str, list[list[float]]] = {}
            self._done = -1

        def _take(self, trainer: Any, epoch: int) -> None:
            if epoch <= self._done:
                return
            self._done = epoch
            for name, value in _scalars(trainer.callback_metrics).items():
                self.history.setdefault(name, []).append([epoch, value])

        def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
            self._take(trainer, trainer.current_epoch - 1)

        def on_fit_end(self, trainer: Any, module: Any) -> None:
            # A fit stopped inside an epoch (max_steps) has not counted it: take it too.
            self._take(trainer, max(trainer.current_epoch - 1, self._done + 1))

    return History()


def _trainer(
    s: TrainSpec, pl: Any, scratch: str, world: int, callbacks: list[Any] | None = None
) -> Any:
    """Lightning's Trainer from the user's arguments, checked key by key."""
    args = coerce(pl.Trainer.__init__, dict(s.trainer_args))
    accepted = set(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}
    unknown = sorted(set(args) - accepted)
    if unknown:
        import difflib

        hints = [
            f"{k!r} (did you mean {m[0]!r}?)"
            if (m := difflib.get_close_matches(k, accepted, 1))
            else repr(k)
            for k in unknown
        ]
        raise UserError(
            f"trainer_args: Lightning's Trainer has no argument {', '.join(hints)}; see "
            "https://lightning.ai/docs/pytorch/stable/common/trainer.html#trainer-flags"
        )
    owned = sorted(set(args) & set(_OWNED))
    if owned:
        raise UserError(
            f"trainer_args: {', '.join(map(repr, owned))} cannot be given as data: the component "
            "sets the logger (TensorBoard, as an output artifact), root directory and callbacks"
        )
    callbacks = list(callbacks or [])
    if args.get("profiler") == "pytorch":
        del args["profiler"]
        if s.trace_path and s.summary_path:
            from headwater.components.torch.profiling import profiler_callback

            callbacks.append(profiler_callback(s.trace_path, s.summary_path))
    args.setdefault("accelerator", "cpu")
    args.setdefault("enable_progress_bar", False)
    args.setdefault("enable_checkpointing", False)
    if world > 1:
        from lightning.fabric.plugins.environments.kubeflow import KubeflowEnvironment

        args.setdefault("strategy", "ddp")
        args["num_nodes"] = world
        args["devices"] = 1
        args["plugins"] = [KubeflowEnvironment()]
    logger: Any = False
    if s.tensorboard_dir:
        logger = _tensorboard_logger(pl, s.tensorboard_dir)
    try:
        return pl.Trainer(logger=logger, default_root_dir=scratch, callbacks=callbacks, **args)
    except Exception as exc:
        raise _rejected(pl, args, exc) from exc


def _tensorboard_logger(pl: Any, directory: str) -> Any:
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    try:
        return TensorBoardLogger(save_dir=directory, name="", version="", default_hp_metric=False)
    except ModuleNotFoundError:
        return CSVLogger(save_dir=directory, name="", version="")


def _rejected(pl: Any, args: dict[str, Any], exc: Exception) -> UserError:
    """Name the trainer argument Lightning rejects, found by trying each key alone."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    plugins = args.get("plugins")
    for key in sorted(args):
        if key in ("plugins", "num_nodes"):
            continue
        alone: dict[str, Any] = {
            "logger": False,
            "enable_progress_bar": False,
            "enable_checkpointing": False,
            "enable_model_summary": False,
            key: args[key],
        }
        if key == "strategy" and plugins:
            alone["plugins"] = plugins
        try:
            pl.Trainer(**alone)
        except Exception as refused:
            said = (str(refused).strip().splitlines() or [type(refused).__name__])[0]
            return UserError(f"trainer_args: Lightning rejects {key}={args[key]!r}: {said}")
    return UserError(f"trainer_args {args}: Lightning's Trainer rejects them: {first}")


def _scalars(found: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in found.items():
        try:
            number = float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError, RuntimeError):
            continue
        if math.isfinite(number):
            out[str(name)] = number
    return dict(sorted(out.items()))


def _classification(module: Any, datamodule: Any, split: str, torch: Any) -> Classification | None:
    """Score the module on `split` when it looks like a classifier; None otherwise."""
    if datamodule is None or not _has(datamodule, None, f"{split}_dataloader"):
        return None
    datamodule.setup("test" if split == "test" else "validate")
    loader = getattr(datamodule, f"{split}_dataloader")()
    logits, labels = [], []
    module.eval()
    with torch.no_grad():
        for batch in loader:
            if not isinstance(batch, (list, tuple)) or len(batch) < 2:
                return None
            x, y = batch[0], batch[1]
            if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
                return None
            out = module(x.to(module.device))
            if not isinstance(out, torch.Tensor):
                return None
            logits.append(out.detach().cpu().float().numpy())
            labels.append(y.detach().cpu().numpy())
    if not logits:
        return None
    import numpy as np

    all_logits, all_labels = np.concatenate(logits), np.concatenate(labels)
    if not is_classification(all_logits, all_labels):
        return None
    categories = getattr(module, "classes", None) or getattr(datamodule, "classes", None)
    return classify(all_logits, all_labels, list(categories) if categories else None)
