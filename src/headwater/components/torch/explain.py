"""Captum attributions for a trained PyTorch model: the work of `explain_model` and `:explain`.

`explain(model, inputs)` attributes each example's predicted class (or a given output) to
its input features with Integrated Gradients or Occlusion and returns an `Explanation`.
`explain_model(model_path, examples, output_dir)` loads a Model artifact and its examples,
explains up to `max_examples` of them and writes, into `output_dir`::

    attributions.csv     one row per example and input feature (flattened index):
                         example, feature, value, attribution
    attributions.json    `Explanation.to_json()`
    example_<i>.png      images only ((N, H, W) or (N, C, H, W) inputs): the input beside its
                         attribution map (channels summed, diverging colours centred at 0)
    index.html           the predictions with the heatmaps, or for other inputs a table of
                         attributions coloured by sign

Integrated Gradients costs about `n_steps` forward and backward passes per example;
Occlusion one forward pass per window position (about 49 per image with the default window).
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.components.torch import _library, model_file
from headwater.errors import InvalidArgumentError, UserError

INTEGRATED_GRADIENTS = "integrated_gradients"
OCCLUSION = "occlusion"
METHODS = (INTEGRATED_GRADIENTS, OCCLUSION)
#: Example files `explain_model` reads, and the arrays it prefers inside an .npz.
EXAMPLE_SUFFIXES = (".npz", ".npy", ".json")
NPZ_KEYS = ("x_test", "x")
#: Input elements one forward pass may take (IG's `internal_batch_size`, Occlusion's
#: `perturbations_per_eval`): 8 MB of float32 inputs, so memory stays bounded on big inputs.
FORWARD_ELEMENTS = 1 << 21
#: The table in index.html shows at most this many features of a non-image input.
HTML_FEATURES = 64


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
    _check_options(method, n_steps)
    if isinstance(baseline, bool) or not isinstance(baseline, (int, float)):
        raise InvalidArgumentError(f"baseline must be a number (got {baseline!r})")
    if not math.isfinite(baseline):
        raise InvalidArgumentError(f"baseline must be a finite number (got {baseline!r})")
    torch = _library.torch()
    captum = _library.captum()
    x = _batch(torch, model, inputs, input_shape)
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
            said = f"{method} failed on this model: {_first_line(exc)}"
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


def explain_model(
    model_path: str,
    examples: str | Any,
    output_dir: str,
    *,
    method: str = INTEGRATED_GRADIENTS,
    target: int | list[int] | None = None,
    baseline: float = 0.0,
    n_steps: int = 50,
    window: tuple[int, ...] | None = None,
    max_examples: int = 16,
) -> Explanation:
    """Explain up to `max_examples` examples with the Model artifact at `model_path`.

    Args:
        model_path: A Model artifact written by `train_lightning` (or a TorchScript file).
        examples: A .npy, .npz (its "x_test" or "x" array, else the first) or .json file
            (nested lists, or {"instances": ...}), a directory holding one, or an array.
        output_dir: Where the files listed in this module's docstring go (created).
        method: "integrated_gradients" or "occlusion".
        target: As for `explain`; a list is cut to the examples explained.
        baseline: The reference input value.
        n_steps: Integrated Gradients' steps.
        window: Occlusion's window, as for `explain`.
        max_examples: Explain the first this many examples only.

    Returns:
        The explanation also written to `attributions.json`.

    Raises:
        InvalidArgumentError: Bad options, as for `explain`, or max_examples < 1.
        UserError: Examples that are missing, unreadable or rejected by the model.
    """
    _check_options(method, n_steps)
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise InvalidArgumentError(f"max_examples must be an integer >= 1 (got {max_examples!r})")
    torch = _library.torch()
    model = model_file.load(model_path)
    meta = model_file.metadata(model_path)
    signature = meta.get("input") if isinstance(meta.get("input"), dict) else {}
    input_shape = signature.get("shape") if signature else None
    classes = [str(c) for c in meta.get("classes") or []]
    found = _read_examples(examples)
    x = _batch(torch, model, found, input_shape)
    count = len(x)
    x = x[:max_examples]
    if isinstance(target, list) and len(target) == count:
        target = target[: len(x)]
    explanation = explain(
        model,
        x,
        method=method,
        target=target,
        baseline=baseline,
        n_steps=n_steps,
        window=window,
        input_shape=input_shape,
    )
    where = Path(output_dir)
    where.mkdir(parents=True, exist_ok=True)
    values = x.detach().cpu().float().numpy()
    _write_csv(where / "attributions.csv", values, explanation)
    (where / "attributions.json").write_text(json.dumps(explanation.to_json()) + "\n")
    images = _is_image(values.shape[1:]) and _draw_heatmaps(where, values, explanation, classes)
    _write_html(where / "index.html", values, explanation, classes, images)
    return explanation


def _check_options(method: str, n_steps: int) -> None:
    if method not in METHODS:
        raise InvalidArgumentError(
            f"unknown explanation method {method!r} (known methods: {', '.join(METHODS)})"
        )
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise InvalidArgumentError(f"n_steps must be an integer >= 1 (got {n_steps!r})")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _shape(shape: Sequence[int | None]) -> str:
    return str(tuple(shape))


def _rejected(shape: Sequence[int], exc: Exception, input_shape: Any) -> str:
    said = f"the model rejected inputs of shape {_shape(shape)}: {_first_line(exc)}"
    return f"{said}; it expects {_shape(input_shape)}" if input_shape else said


def _batch(torch: Any, model: Any, inputs: Any, input_shape: Any) -> Any:
    """`inputs` as a float tensor batch on the model's device, in its parameters' dtype."""
    import numpy as np

    if torch.is_tensor(inputs):
        x = inputs.detach()
    else:
        try:
            array = np.asarray(inputs)
        except (TypeError, ValueError) as exc:
            raise UserError(
                f"inputs must be a tensor, an array or nested lists of numbers: {_first_line(exc)}"
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


def _read_examples(examples: Any) -> Any:
    """The array in `examples` (a path to a file or directory), or `examples` itself."""
    if not isinstance(examples, (str, Path)):
        return examples
    import numpy as np

    where = Path(examples)
    if where.is_dir():
        files = sorted(p for p in where.iterdir() if p.suffix in EXAMPLE_SUFFIXES)
        if not files:
            names = ", ".join(sorted(p.name for p in where.iterdir())[:10]) or "none"
            raise UserError(
                f"examples directory {str(where)!r} holds no {'/'.join(EXAMPLE_SUFFIXES)} file "
                f"(files: {names})"
            )
        where = files[0]
    if not where.exists():
        raise UserError(f"examples {str(where)!r} do not exist")
    try:
        if where.suffix == ".json":
            found = json.loads(where.read_text())
            if isinstance(found, dict):
                key = next((k for k in ("instances", "inputs", "x") if k in found), None)
                if key is None:
                    raise UserError(
                        f"examples {str(where)!r} is a JSON object without 'instances', "
                        f"'inputs' or 'x' (keys: {', '.join(sorted(found))})"
                    )
                found = found[key]
            return found
        with open(where, "rb") as stream:
            loaded = np.load(stream, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                return loaded
            with loaded:
                if not loaded.files:
                    raise UserError(f"examples {str(where)!r} holds no arrays")
                key = next((k for k in NPZ_KEYS if k in loaded.files), loaded.files[0])
                return loaded[key]
    except UserError:
        raise
    except (OSError, ValueError) as exc:
        raise UserError(
            f"examples {str(where)!r} cannot be read as .npy, .npz or JSON: {_first_line(exc)}"
        ) from exc


def _is_image(shape: tuple[int, ...]) -> bool:
    return len(shape) in (2, 3) and shape[-1] > 1 and shape[-2] > 1


def _write_csv(path: Path, values: Any, explanation: Explanation) -> None:
    import numpy as np

    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["example", "feature", "value", "attribution"])
        for i, attribution in enumerate(explanation.attributions):
            flat = np.asarray(attribution, dtype=np.float64).reshape(-1)
            for j, (value, score) in enumerate(zip(values[i].reshape(-1), flat, strict=True)):
                writer.writerow([i, j, repr(float(value)), repr(float(score))])


def _label(prediction: int | float, classes: list[str]) -> str:
    if isinstance(prediction, float):
        return f"{prediction:.4g}"
    name = classes[prediction] if 0 <= prediction < len(classes) else None
    return (
        f"{prediction} ({name})"
        if name is not None and name != str(prediction)
        else str(prediction)
    )


def _draw_heatmaps(where: Path, values: Any, explanation: Explanation, classes: list[str]) -> bool:
    """Write example_<i>.png for each image; False when matplotlib is not installed."""
    import numpy as np

    try:
        from matplotlib.figure import Figure
    except ImportError:
        return False
    for i, attribution in enumerate(explanation.attributions):
        image = values[i]
        heat = np.asarray(attribution, dtype=np.float64)
        if image.ndim == 3:
            heat = heat.sum(axis=0)
            if image.shape[0] == 3:
                low, high = image.min(), image.max()
                image = np.moveaxis((image - low) / (high - low or 1.0), 0, -1)
            else:
                image = image.mean(axis=0)
        # A Figure without pyplot draws with Agg and leaves the global backend alone.
        figure = Figure(figsize=(6.4, 3.2), dpi=80, layout="constrained")
        left, right = figure.subplots(1, 2)
        left.imshow(image, cmap="gray" if image.ndim == 2 else None)
        left.set_title("input")
        bound = float(np.abs(heat).max()) or 1.0
        shown = right.imshow(heat, cmap="RdBu_r", vmin=-bound, vmax=bound)
        right.set_title(f"attribution to {_label(explanation.targets[i], classes)}")
        figure.colorbar(shown, ax=right)
        for axes in (left, right):
            axes.set_xticks([])
            axes.set_yticks([])
        figure.suptitle(f"example {i}: predicted {_label(explanation.predictions[i], classes)}")
        figure.savefig(where / f"example_{i}.png")
    return True


def _write_html(
    path: Path, values: Any, explanation: Explanation, classes: list[str], images: bool
) -> None:
    import numpy as np

    method = explanation.method.replace("_", " ")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(method)} attributions</title>",
        "<style>body{font-family:sans-serif;margin:1.5em}td,th{padding:2px 6px;"
        "font-size:0.85em;text-align:right}figure{display:inline-block;margin:0.5em}"
        "figcaption{font-size:0.9em}</style></head><body>",
        f"<h1>{html.escape(method.capitalize())}: {len(explanation.targets)} examples</h1>",
        "<p>Red features push the attributed output up, blue ones down "
        "(attributions.csv has every value).</p>",
    ]

    def caption(i: int) -> str:
        text = (
            f"example {i}: predicted {_label(explanation.predictions[i], classes)}, "
            f"attributed to {_label(explanation.targets[i], classes)}"
        )
        if explanation.deltas is not None:
            text += f", delta {explanation.deltas[i]:.2g}"
        return html.escape(text)

    if images:
        for i in range(len(explanation.targets)):
            parts.append(
                f"<figure><img src='example_{i}.png' alt='example {i}'>"
                f"<figcaption>{caption(i)}</figcaption></figure>"
            )
    else:
        if _is_image(values.shape[1:]):
            parts.append("<p>No heatmaps: matplotlib is not installed.</p>")
        features = int(np.prod(values.shape[1:]))
        shown = min(features, HTML_FEATURES)
        if shown < features:
            parts.append(f"<p>The first {shown} of {features} features.</p>")
        parts.append("<table><tr><th>example</th>")
        parts.extend(f"<th>{j}</th>" for j in range(shown))
        parts.append("</tr>")
        for i, attribution in enumerate(explanation.attributions):
            flat = np.asarray(attribution, dtype=np.float64).reshape(-1)[:shown]
            bound = float(np.abs(flat).max()) or 1.0
            parts.append(f"<tr><th title='{caption(i)}'>{i}</th>")
            for score in flat:
                colour = "220,50,32" if score > 0 else "33,102,172"
                alpha = min(1.0, abs(float(score)) / bound)
                parts.append(f"<td style='background:rgba({colour},{alpha:.2f})'>{score:.3g}</td>")
            parts.append("</tr>")
        parts.append("</table><ul>")
        parts.extend(f"<li>{caption(i)}</li>" for i in range(len(explanation.targets)))
        parts.append("</ul>")
    parts.append("</body></html>\n")
    path.write_text("".join(parts))
