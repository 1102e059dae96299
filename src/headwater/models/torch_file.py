"""The PyTorch Model artifact: a state dict, a TorchScript export and the metadata to rebuild it.

Layout at the artifact's path (a directory)::

    state_dict.pt    `module.state_dict()` (torch.save; load with weights_only=True)
    model.pt         TorchScript export, when the module scripts or traces (absent otherwise)
    metadata.json    framework "pytorch", class_path, module_args, input/output signature,
                     classes, torch and Lightning versions: the artifact's metadata, readable
                     without the metadata store
    code/            the training code, when it came as a file artifact (class_path names it)

`load(path)` rebuilds the module from its class and state dict when the class can be found
(its code travels in `code/`), else loads the TorchScript export; either way the module is
in eval mode on the CPU. The model server and `explain_model` load models this way;
`train_lightning` saves them with `save`.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from headwater.errors import UserError
from headwater.loading import load_class, split
from headwater.models import libraries
from headwater.models.directory import METADATA_FILE, read_metadata

STATE_DICT = "state_dict.pt"
TORCHSCRIPT = "model.pt"
CODE_DIR = "code"
FORMAT = "headwater.pytorch/1"


def save(
    module: Any,
    directory: str,
    *,
    class_path: str,
    module_args: dict[str, Any],
    example: Any = None,
    code_path: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write `module` into `directory` (created) and return the metadata written beside it.

    Args:
        module: The trained torch.nn.Module (a LightningModule is one).
        directory: The Model artifact's path.
        class_path: `"pkg.mod:Class"`, or the class name when the code is `code_path`.
        module_args: The keyword arguments that rebuild the module.
        example: One input batch (a tensor): gives the input signature and, when the module
            does not script, a traced TorchScript export.
        code_path: The Python file (or directory) the class came from, copied into `code/`.
        extra: More metadata (metrics, Lightning version, ...).
    """
    torch = libraries.torch()
    where = Path(directory)
    where.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    torch.save(state, where / STATE_DICT)
    if code_path:
        source = Path(code_path)
        target = where / CODE_DIR
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.mkdir(exist_ok=True)
            shutil.copy2(source, target / source.name)
            module_name, name = split(class_path)
            class_path = f"{module_name or source.name}:{name}"
    was_training = module.training
    module.eval()
    try:
        scripted = _torchscript(module, example)
        output = None
        if example is not None:
            with torch.no_grad():
                result = module(example)
            if hasattr(result, "shape"):
                output = {"shape": [None, *result.shape[1:]], "dtype": _dtype(result)}
    finally:
        module.train(was_training)
    if scripted is not None:
        scripted.save(str(where / TORCHSCRIPT))
    metadata: dict[str, Any] = {
        "framework": "pytorch",
        "format": FORMAT,
        "framework_version": torch.__version__,
        "class_path": class_path,
        "code": CODE_DIR if code_path else None,
        "module_args": module_args,
        "state_dict": STATE_DICT,
        "torchscript": TORCHSCRIPT if scripted is not None else None,
        "input": (
            {"shape": [None, *example.shape[1:]], "dtype": _dtype(example)}
            if example is not None and hasattr(example, "shape")
            else None
        ),
        "output": output,
        **(extra or {}),
    }
    (where / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return metadata


def _dtype(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _torchscript(module: Any, example: Any) -> Any:
    """A TorchScript export: scripted if the module scripts, else traced on `example`."""
    with warnings.catch_warnings():
        # TorchScript is deprecated in torch 2.x but is still what servers load without code.
        warnings.simplefilter("ignore")
        try:
            if hasattr(module, "to_torchscript"):
                return module.to_torchscript(method="script")
            return libraries.torch().jit.script(module)
        except Exception:
            pass
        if example is None:
            return None
        try:
            if hasattr(module, "to_torchscript"):
                return module.to_torchscript(method="trace", example_inputs=example)
            return libraries.torch().jit.trace(module, example)
        except Exception:
            return None


def metadata(path: str) -> dict[str, Any]:
    """The metadata `save` wrote at `path` ({} when there is none)."""
    return read_metadata(path)


def load(path: str) -> Any:
    """The module in the Model artifact at `path`, in eval mode on the CPU.

    Rebuilt from its class and state dict when the class is found (in `code/` or installed),
    else the TorchScript export.

    Raises:
        UserError: Nothing at `path`, or neither a loadable class nor a TorchScript export.
    """
    torch = libraries.torch()
    where = Path(path)
    if not where.exists():
        raise UserError(f"model artifact {path!r} does not exist")
    if where.is_file():
        return _load_torchscript(where)
    meta = metadata(path)
    class_path = meta.get("class_path")
    why = "its metadata names no class"
    if class_path and (where / STATE_DICT).exists():
        code = where / meta["code"] if meta.get("code") else None
        try:
            cls = load_class(class_path, str(code) if code else None, role="model class")
        except UserError as exc:
            why = str(exc)
        else:
            module = cls(**(meta.get("module_args") or {}))
            state = torch.load(where / STATE_DICT, map_location="cpu", weights_only=True)
            module.load_state_dict(state)
            return module.eval()
    if (where / TORCHSCRIPT).exists():
        return _load_torchscript(where / TORCHSCRIPT)
    raise UserError(
        f"model artifact {path!r} cannot be loaded: {why}, and it has no TorchScript export "
        f"({TORCHSCRIPT}); is it a model from train_lightning?"
    )


def _load_torchscript(path: Path) -> Any:
    torch = libraries.torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return torch.jit.load(str(path), map_location="cpu").eval()
        except Exception as exc:
            raise UserError(
                f"{str(path)!r} is not a TorchScript model ({type(exc).__name__})"
            ) from exc
