"""Captum attributions for a loaded PyTorch model: the work of `explain_model` and `:explain`.

`explain(model, inputs)` attributes each example's predicted class (or a given output) to
its input features with Integrated Gradients or Occlusion and returns an `Explanation`. The
`explain_model` component (`headwater.components.torch.explain`) writes them into files;
the model server (`headwater.serving.runtimes.torch`) answers `:explain` requests with them.

Integrated Gradients costs about `n_steps` forward and backward passes per example;
Occlusion one forward pass per window position (about 49 per image with the default window).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.errors import InvalidArgumentError, UserError
from headwater.models import libraries

INTEGRATED_GRADIENTS = "integrated_gradients"
OCCLUSION = "occlusion"
METHODS = (INTEGRATED_GRADIENTS, OCCLUSION)
#: Input elements one forward pass may take (IG's `internal_batch_size`, Occlusion's
#: `perturbations_per_eval`): 8 MB of float32 inputs, so memory stays bounded on big inputs.
FORWARD_ELEMENTS = 1 << 21


@dataclass
class Explanation:
    """Attributions for a batch of examples.

    Attributes:
        method: "integrated_gradients" or "occlusion".
        predictions: Per example, the predicted class (argmax of the scores) or, for a model
            with one output, that output.
        targets: Per example, the output index attributed.
        attributions: Per example, nested lists shaped like the input (no batch dimension).
        deltas: Integrated Gradients' convergence deltas, sum(attributions) minus
            (f(x) - f(baseline)) for the target; None for Occlusion.
    """

    method: str
    predictions: list[int | float]
    targets: list[int]
    attributions: list[Any]
    deltas: list[float] | None

    def to_json(self) -> dict[str, Any]:
        """The explanation as JSON-ready data (non-finite numbers become None)."""
        return {
            "method": self.method,
            "predictions": _finite(self.predictions),
            "targets": list(self.targets),
            "attributions": _finite(self.attributions),
            "deltas": None if self.deltas is None else _finite(self.deltas),
        }


def explain(
    model: Any,
    inputs: Any,
    *,
    method: str = INTEGRATED_GRADIENTS,
    target: int | list[int] | None = None,
    baseline: float = 0.0,
    n_steps: int = 50,
    window: tuple[int, ...] | None = None,
    input_shape: Sequence[int | None] | None = None,
) -> Explanation:
    """Attribute `model`'s outputs on `inputs` to their features with Captum.

    Args:
        model: A torch.nn.Module or TorchScript module, in eval mode (dropout in train mode
            makes attributions random).
        inputs: A batch: tensor, NumPy array or nested lists of numbers. One example without
            its batch dimension is batched when `input_shape` shows it is one.
        method: "integrated_gradients" or "occlusion".
        target: The output to attribute: None for each example's predicted class (output 0 for
            a model with one output), an index for all examples, or one index per example.
        baseline: The reference input value (every feature), e.g. 0.0 for a black image.
        n_steps: Integrated Gradients' steps along the path from baseline to input.
        window: Occlusion's sliding window, one size per input dimension (no batch). Default:
            1 feature for vectors; for images the whole channel depth and a quarter of the
            smaller side. Windows move by half their size (by their size along dimensions
            they cover entirely).
        input_shape: The shape the model expects, batch dimension None (the Model artifact's
            input signature); named when the model rejects `inputs`.

    Returns:
        The predictions, targets, attributions and (Integrated Gradients) deltas.

    Raises:
        InvalidArgumentError: An unknown method, n_steps < 1, a target out of range, a window
            that does not fit the inputs.
        UserError: Inputs that are not numbers or that the model rejects, outputs that are not
            one score per class, a model Captum cannot differentiate.
    """
    check_options(method, n_steps)
    if isinstance(baseline, bool) or not isinstance(baseline, (int, float)):
        raise InvalidArgumentError(f"baseline must be a number (got {baseline!r})")
    if not math.isfinite(baseline):
        raise InvalidArgumentError(f"baseline must be a finite number (got {baseline!r})")
    torch = libraries.torch()
    captum = libraries.captum()
    x = batch(torch, model, inputs, input_shape)
    shape = tuple(x.shape[1:])
    sizes = _window(shape, window) if method == OCCLUSION else ()
    with torch.no_grad():
        try:
            scores = model(x)
        except Exception as exc:
            raise UserError(_rejected(x.shape, exc, input_shape)) from exc
    predictions, width = _predictions(torch, scores, len(x))
    targets = _targets(target, predictions, width, len(x))
    # A 1-D output has no class axis for Captum to index.
    captum_target = None if scores.ndim == 1 else targets
    per_example = max(1, x[0].numel())
    rows = max(1, FORWARD_ELEMENTS // per_example)
    deltas = None
    # Callers such as a server may be inside torch.no_grad(); attributions need gradients.
    with torch.enable_grad():
        try:
            if method == INTEGRATED_GRADIENTS:
                attributions, delta = captum.IntegratedGradients(model).attribute(
                    x,
                    baselines=float(baseline),
                    target=captum_target,
                    n_steps=n_steps,
                    internal_batch_size=max(len(x), min(len(x) * n_steps, rows)),
                    return_convergence_delta=True,
                )
                deltas = [float(d) for d in delta.detach().cpu().reshape(-1).tolist()]
            else:
                attributions = captum.Occlusion(model).attribute(
                    x,
                    sliding_window_shapes=sizes,
                    strides=_strides(shape, sizes),
                    baselines=float(baseline),
                    target=captum_target,
                    perturbations_per_eval=max(1, rows // len(x)),
                )
        except MemoryError:
            raise
        except Exception as exc:
            said = f"{method} failed on this model: {first_line(exc)}"
            if method == INTEGRATED_GRADIENTS:
                said += " (method='occlusion' needs no gradients)"
            raise UserError(said) from exc
    return Explanation(
        method=method,
        predictions=predictions,
        targets=targets,
        attributions=attributions.detach().cpu().float().tolist(),
        deltas=deltas,
    )


def check_options(method: str, n_steps: int) -> None:
    """Raise InvalidArgumentError for an unknown `method` or an `n_steps` below 1."""
    if method not in METHODS:
        raise InvalidArgumentError(
            f"unknown explanation method {method!r} (known methods: {', '.join(METHODS)})"
        )
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise InvalidArgumentError(f"n_steps must be an integer >= 1 (got {n_steps!r})")


def first_line(exc: BaseException) -> str:
    """The first line of what `exc` says (its type's name when it says nothing)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _shape(shape: Sequence[int | None]) -> str:
    return str(tuple(shape))


def _rejected(shape: Sequence[int], exc: Exception, input_shape: Any) -> str:
    said = f"the model rejected inputs of shape {_shape(shape)}: {first_line(exc)}"
    return f"{said}; it expects {_shape(input_shape)}" if input_shape else said


def batch(torch: Any, model: Any, inputs: Any, input_shape: Any) -> Any:
    """`inputs` as a float tensor batch on the model's device, in its parameters' dtype."""
    import numpy as np

    if torch.is_tensor(inputs):
        x = inputs.detach()
    else:
        try:
            array = np.asarray(inputs)
        except (TypeError, ValueError) as exc:
            raise UserError(
                f"inputs must be a tensor, an array or nested lists of numbers: {first_line(exc)}"
            ) from exc
        if array.dtype.kind not in "biuf":
            raise UserError(f"inputs must be numbers (got an array of {array.dtype})")
        x = torch.from_numpy(np.ascontiguousarray(array))
    if x.ndim == 0:
        raise UserError("inputs must be a batch of examples (got a single number)")
    if input_shape and x.ndim == len(input_shape) - 1:
        x = x.unsqueeze(0)
    if x.shape[0] == 0:
        raise UserError(f"there are no examples to explain (inputs of shape {_shape(x.shape)})")
    parameter = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    dtype = torch.float32
    if parameter is not None and parameter.is_floating_point():
        dtype = parameter.dtype
    elif x.is_floating_point():
        dtype = x.dtype
    device = parameter.device if parameter is not None else x.device
    return x.to(device=device, dtype=dtype)


def _predictions(torch: Any, scores: Any, count: int) -> tuple[list[int | float], int]:
    """Each example's predicted class (or single output), and how many outputs it has."""
    if not torch.is_tensor(scores):
        raise UserError(
            f"the model returns a {type(scores).__name__}; explanations need a tensor of "
            "scores, one row per example"
        )
    shape = tuple(scores.shape)
    if not shape or shape[0] != count or len(shape) > 2 or not scores.is_floating_point():
        raise UserError(
            f"explanations need float scores of shape ({count}, classes) or ({count},); the "
            f"model returns {scores.dtype} of shape {_shape(shape)}".replace("torch.", "")
        )
    width = 1 if len(shape) == 1 else shape[1]
    if width > 1:
        return [int(p) for p in scores.argmax(dim=1).tolist()], width
    return [float(p) for p in scores.reshape(count).tolist()], width


def _targets(target: Any, predictions: list[int | float], width: int, count: int) -> list[int]:
    if target is None:
        return [int(p) for p in predictions] if width > 1 else [0] * count
    if isinstance(target, list):
        if len(target) != count:
            raise InvalidArgumentError(
                f"target lists {len(target)} outputs for {count} examples; give one per example"
            )
        chosen = target
    else:
        chosen = [target] * count
    for t in chosen:
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < width:
            raise InvalidArgumentError(
                f"target {t!r} is not an output of the model: it has {width} "
                f"output{'s' if width > 1 else ''} (0 to {width - 1})"
            )
    return list(chosen)


def _window(shape: tuple[int, ...], window: tuple[int, ...] | None) -> tuple[int, ...]:
    if window is None:
        if len(shape) == 1:
            return (1,)
        side = max(1, min(shape[-2:]) // 4)
        return (*shape[:-2], side, side)
    sizes = tuple(window)
    fits = len(sizes) == len(shape) and all(
        isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= n
        for w, n in zip(sizes, shape, strict=True)
    )
    if not fits:
        raise InvalidArgumentError(
            f"occlusion window {window!r} does not fit examples of shape {_shape(shape)}: give "
            f"one size per dimension, each from 1 to that dimension's size"
        )
    return sizes


def _strides(shape: tuple[int, ...], window: tuple[int, ...]) -> tuple[int, ...]:
    # Half-window strides overlap the windows, which smooths the map; a window that covers a
    # whole dimension has nowhere to slide.
    return tuple(w if w == n else max(1, w // 2) for w, n in zip(window, shape, strict=True))


def _finite(value: Any) -> Any:
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
