"""`TorchRuntime`: PyTorch modules, with Captum explanations.

Reads a Model artifact from `train_lightning` (a directory: the module rebuilt from its class
and state dict, else its TorchScript export; see `headwater.models.torch_file`) or
a TorchScript file (`.pt`). The input is one tensor `input-0` with the datatype and shape the
artifact recorded (`metadata.json` "input"; any shape when it recorded none); the output
`output-0` is what the module returns (several tensors: `output-0`, `output-1`, ...; a dict:
its keys). Modules run in eval mode under `torch.inference_mode`, on the CPU.

Explanations call `headwater.models.torch_explain.explain` (Captum): Integrated
Gradients by default, or Occlusion, with the request's `method`, `target`, `baseline`,
`n_steps` and `window` parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from headwater.serving.errors import InvalidInputError
from headwater.serving.runtimes.base import (
    Explanation,
    ModelMetadata,
    ModelRuntime,
    check_options,
)
from headwater.serving.tensors import TensorSpec

INPUT = "input-0"
OUTPUT = "output-0"
#: The explanation parameters a request may give, as `explain()` takes them.
EXPLAIN_OPTIONS = ("method", "target", "baseline", "n_steps", "window")
_DATATYPES = {
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "uint8": "UINT8",
    "bool": "BOOL",
}


class TorchRuntime(ModelRuntime):
    """Serves a `torch.nn.Module` or TorchScript module (see the module docstring)."""

    framework = "pytorch"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._module: Any = None
        self._torch: Any = None
        self._input_shape: list[int | None] | None = None

    def load(self) -> None:
        """Load the module (rebuilt or TorchScript) and its recorded signature."""
        from headwater.models import libraries, torch_file

        torch = libraries.torch()
        path = str(self.source.path)
        module = torch_file.load(path)
        saved = torch_file.metadata(path)
        if saved.get("framework") not in (None, "pytorch"):
            saved = {}
        signature = saved.get("input") if isinstance(saved.get("input"), dict) else None
        result = saved.get("output") if isinstance(saved.get("output"), dict) else None
        self._module, self._torch = module, torch
        self._input_shape = list(signature["shape"]) if signature else None
        classes = saved.get("classes")
        self.metadata = ModelMetadata(
            platform="pytorch",
            inputs=(_spec(INPUT, signature, default="FP32"),),
            outputs=(_spec(OUTPUT, result, default="FP32"),),
            default_outputs=(),
            feature_names=_names(saved.get("feature_names")),
            details={
                "class_path": saved.get("class_path"),
                "torchscript": isinstance(module, torch.jit.ScriptModule),
                "classes": classes if isinstance(classes, list) else None,
            },
        )

    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """The module's forward pass on the batch, as named arrays."""
        torch = self._torch
        x = self._tensor(self.single_input(inputs))
        with torch.inference_mode():
            try:
                result = self._module(x)
            except (RuntimeError, ValueError, TypeError, IndexError) as exc:
                said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise InvalidInputError(
                    f"the model rejected an input of shape {list(x.shape)}: {said}"
                ) from exc
        found = _outputs(torch, result)
        return {k: v for k, v in found.items() if outputs is None or k in outputs}

    def explain(
        self, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """Captum attributions through `headwater.models.torch_explain.explain`."""
        from headwater.models.torch_explain import explain

        check_options(options, EXPLAIN_OPTIONS, what="a PyTorch explanation")
        kwargs = _explain_kwargs(options)
        found = explain(
            self._module, self.single_input(inputs), input_shape=self._input_shape, **kwargs
        )
        return Explanation(
            method=found.method,
            predictions=np.asarray(found.predictions),
            attributions=np.asarray(found.attributions, dtype=np.float32),
            feature_names=list(self.metadata.feature_names or ()) or None,
            targets=list(found.targets),
            deltas=found.deltas,
        )

    def unload(self) -> None:
        """Drop the module."""
        self._module = None
        super().unload()

    def _tensor(self, array: np.ndarray) -> Any:
        torch = self._torch
        x = torch.from_numpy(np.ascontiguousarray(array))
        parameter = next(iter(self._module.parameters()), None)
        if parameter is not None and parameter.is_floating_point() and x.is_floating_point():
            x = x.to(parameter.dtype)
        return x


def _spec(name: str, signature: dict[str, Any] | None, *, default: str) -> TensorSpec:
    if not signature:
        return TensorSpec(name, default, ())
    shape = tuple(-1 if d is None else int(d) for d in signature.get("shape") or ())
    return TensorSpec(name, _DATATYPES.get(str(signature.get("dtype")), default), shape)


def _names(found: Any) -> tuple[str, ...] | None:
    return tuple(str(n) for n in found) if isinstance(found, list) and found else None


def _outputs(torch: Any, result: Any) -> dict[str, np.ndarray]:
    if torch.is_tensor(result):
        return {OUTPUT: result.detach().cpu().numpy()}
    if isinstance(result, dict):
        return {str(k): _array(torch, v) for k, v in result.items()}
    if isinstance(result, list | tuple):
        return {f"output-{i}": _array(torch, v) for i, v in enumerate(result)}
    return {OUTPUT: np.asarray(result)}


def _array(torch: Any, value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if torch.is_tensor(value) else np.asarray(value)


def _explain_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """The explanation options as `explain()` takes them, their types checked."""
    kwargs = dict(options)
    if "method" in kwargs and not isinstance(kwargs["method"], str):
        raise InvalidInputError(f"parameter 'method' must be a string, got {kwargs['method']!r}")
    if "baseline" in kwargs:
        baseline = kwargs["baseline"]
        if isinstance(baseline, bool) or not isinstance(baseline, int | float):
            raise InvalidInputError(f"parameter 'baseline' must be a number, got {baseline!r}")
        kwargs["baseline"] = float(baseline)
    if "window" in kwargs:
        window = kwargs["window"]
        if not isinstance(window, list):
            raise InvalidInputError(f"parameter 'window' must be a list of sizes, got {window!r}")
        kwargs["window"] = tuple(window)
    return kwargs
