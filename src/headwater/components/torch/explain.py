"""`explain_model`'s work: Captum attributions of a Model artifact's examples, as files.

The attributions are `headwater.models.torch_explain.explain`'s (the model server's too).
`explain_model(model_path, examples, output_dir)` loads a Model artifact and its examples,
explains up to `max_examples` of them and writes, into `output_dir`::

    attributions.csv     one row per example and input feature (flattened index):
                         example, feature, value, attribution
    attributions.json    `Explanation.to_json()`
    example_<i>.png      images only ((N, H, W) or (N, C, H, W) inputs): the input beside its
                         attribution map (channels summed, diverging colours centred at 0)
    index.html           the predictions with the heatmaps, or for other inputs a table of
                         attributions coloured by sign; the heatmaps are inside it as data:
                         URIs (up to `MAX_INLINE_IMAGES` bytes of them), so the page shows
                         them wherever it is opened: copied to the `report` HTML artifact, in
                         the web UI (a sandboxed iframe with no folder around it), downloaded

Integrated Gradients costs about `n_steps` forward and backward passes per example;
Occlusion one forward pass per window position (about 49 per image with the default window).
"""

from __future__ import annotations

import base64
import csv
import html
import json
from pathlib import Path
from typing import Any

from headwater.components.torch import _library
from headwater.errors import InvalidArgumentError, UserError
from headwater.models import torch_file
from headwater.models.torch_explain import (
    INTEGRATED_GRADIENTS,
    Explanation,
    batch,
    check_options,
    explain,
    first_line,
)

#: Example files `explain_model` reads, and the arrays it prefers inside an .npz.
EXAMPLE_SUFFIXES = (".npz", ".npy", ".json")
NPZ_KEYS = ("x_test", "x")
#: The table in index.html shows at most this many features of a non-image input.
HTML_FEATURES = 64
#: PNG bytes index.html carries inline; later heatmaps are linked by name (beside the page
#: only in the attributions artifact). 2 MiB is ~2.7 MiB of base64, under the web UI's 4 MiB
#: HTML preview; the 16 default examples take about 0.4 MiB.
MAX_INLINE_IMAGES = 2 * 1024 * 1024


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
    check_options(method, n_steps)
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise InvalidArgumentError(f"max_examples must be an integer >= 1 (got {max_examples!r})")
    torch = _library.torch()
    model = torch_file.load(model_path)
    meta = torch_file.metadata(model_path)
    signature = meta.get("input") if isinstance(meta.get("input"), dict) else {}
    input_shape = signature.get("shape") if signature else None
    classes = [str(c) for c in meta.get("classes") or []]
    found = _read_examples(examples)
    x = batch(torch, model, found, input_shape)
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
            f"examples {str(where)!r} cannot be read as .npy, .npz or JSON: {first_line(exc)}"
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
        budget, linked = MAX_INLINE_IMAGES, 0
        for i in range(len(explanation.targets)):
            png = (path.parent / f"example_{i}.png").read_bytes()
            if len(png) <= budget:
                budget -= len(png)
                src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            else:
                src, linked = f"example_{i}.png", linked + 1
            parts.append(
                f"<figure><img src='{src}' alt='example {i}'>"
                f"<figcaption>{caption(i)}</figcaption></figure>"
            )
        if linked:
            parts.append(
                f"<p>{linked} of the heatmaps did not fit in this page: see the "
                "example_N.png files of the attributions artifact.</p>"
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
