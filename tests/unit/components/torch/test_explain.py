"""Captum explanations: exact attributions of a linear model, a digits CNN's report files,
Occlusion on tabular data, example files and each refusal as one clear error."""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from headwater.components.torch.explain import explain_model
from headwater.errors import InvalidArgumentError, UserError
from headwater.models import torch_file
from headwater.models.torch_explain import explain

pytest.importorskip("captum")


def linear(weights: list[list[float]], bias: list[float]) -> nn.Linear:
    """A linear model with known weights: its IG attributions are exactly w * (x - baseline)."""
    layer = nn.Linear(len(weights[0]), len(weights))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weights))
        layer.bias.copy_(torch.tensor(bias))
    return layer.eval()


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """A DigitsClassifier trained briefly (plain torch loop, no Trainer), saved as an artifact;
    returns its path and 16 test digits."""
    from headwater.components.torch.digits import DigitsClassifier, splits

    torch.manual_seed(0)
    arrays = splits()
    x, y = torch.from_numpy(arrays["x_train"]), torch.from_numpy(arrays["y_train"])
    model = DigitsClassifier(width=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(4):
        for start in range(0, len(x), 128):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(
                model(x[start : start + 128]), y[start : start + 128]
            )
            loss.backward()
            optimizer.step()
    path = tmp_path_factory.mktemp("digits") / "model"
    torch_file.save(
        model.eval(),
        str(path),
        class_path="headwater.components.torch.digits:DigitsClassifier",
        module_args={"width": 8},
        example=x[:2],
        extra={"classes": list(DigitsClassifier.classes)},
    )
    return str(path), arrays["x_test"][:16]


def test_integrated_gradients_of_a_linear_model_are_exact() -> None:
    model = linear([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], [0.1, -0.2])
    x = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    found = explain(model, x, baseline=0.5, n_steps=20)
    with torch.no_grad():
        scores = model(x)
        reference = model(torch.full_like(x, 0.5))
    assert found.method == "integrated_gradients"
    assert found.predictions == scores.argmax(1).tolist() == found.targets
    for i, t in enumerate(found.targets):
        exact = model.weight[t].detach() * (x[i] - 0.5)
        assert torch.allclose(torch.tensor(found.attributions[i]), exact, atol=1e-5)
        # Completeness: the attributions add up to f(x) - f(baseline) for the target.
        gap = float(scores[i, t] - reference[i, t])
        assert sum(found.attributions[i]) == pytest.approx(gap, abs=1e-4)
        assert found.deltas is not None and abs(found.deltas[i]) < 1e-4


def test_a_chosen_target_and_a_one_output_model() -> None:
    model = linear([[2.0, -1.0], [1.0, 1.0]], [0.0, 0.0])
    found = explain(model, [[1, 1], [2, 0]], target=[1, 0])  # integers from JSON: cast
    assert found.targets == [1, 0]
    assert np.allclose(found.attributions, [[1.0, 1.0], [4.0, 0.0]], atol=1e-5)
    regression = linear([[3.0, 0.0, -1.0]], [1.0])
    found = explain(regression, np.array([[1.0, 5.0, 2.0]]))
    assert found.predictions == [pytest.approx(2.0)] and found.targets == [0]
    assert found.attributions == [pytest.approx([3.0, 0.0, -2.0], abs=1e-5)]


def test_occlusion_on_tabular_inputs_is_each_feature_removed() -> None:
    model = linear([[1.0, -2.0, 0.5, 0.0]], [0.0])
    x = torch.tensor([[1.0, 1.0, 2.0, 7.0]])
    found = explain(model, x, method="occlusion")
    # Occluding feature j with 0 changes the output by w_j * x_j.
    assert found.deltas is None
    assert found.attributions == [pytest.approx([1.0, -2.0, 1.0, 0.0], abs=1e-6)]


def test_explain_model_on_digits_writes_the_report(
    tmp_path: Path, digits_model: tuple[str, np.ndarray]
) -> None:
    path, digits = digits_model
    np.savez(tmp_path / "digits.npz", y_test=np.zeros(20), x_test=digits)
    out = tmp_path / "out"
    found = explain_model(path, str(tmp_path), str(out), max_examples=5, n_steps=32)
    model, x = torch_file.load(path), torch.from_numpy(digits[:5])
    with torch.no_grad():
        scores, reference = model(x), model(torch.zeros_like(x))
    expected = scores.argmax(1).tolist()
    assert found.predictions == expected == found.targets
    assert np.asarray(found.attributions).shape == (5, 1, 8, 8)
    # A ReLU network is not linear: completeness holds to within IG's delta, a few percent.
    gaps = [float(scores[i, t] - reference[i, t]) for i, t in enumerate(found.targets)]
    assert found.deltas is not None
    for attribution, gap, delta in zip(found.attributions, gaps, found.deltas, strict=True):
        assert float(np.sum(attribution)) - gap == pytest.approx(delta, abs=1e-3)
        assert abs(delta) < 0.05 * abs(gap)
    assert json.loads((out / "attributions.json").read_text()) == found.to_json()
    with (out / "attributions.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 5 * 64 and list(rows[0]) == ["example", "feature", "value", "attribution"]
    assert float(rows[64 + 10]["value"]) == pytest.approx(float(digits[1].reshape(-1)[10]))
    assert float(rows[64 + 10]["attribution"]) == pytest.approx(
        np.asarray(found.attributions[1]).reshape(-1)[10]
    )
    for i in range(5):
        assert (out / f"example_{i}.png").read_bytes().startswith(b"\x89PNG")
    page = (out / "index.html").read_text()
    assert f"example 0: predicted {expected[0]}" in page
    # The heatmaps travel inside the page: the `report` artifact is this file alone.
    inline = re.findall(r"<img src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert [base64.b64decode(s) for s in inline] == [
        (out / f"example_{i}.png").read_bytes() for i in range(5)
    ]
    assert "src='example_" not in page


def test_heatmaps_past_the_inline_budget_are_linked_and_said_so(
    tmp_path: Path, digits_model: tuple[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    from headwater.components.torch import explain as module

    path, digits = digits_model
    np.save(tmp_path / "digits.npy", digits[:3])
    monkeypatch.setattr(module, "MAX_INLINE_IMAGES", 1)
    explain_model(path, str(tmp_path / "digits.npy"), str(tmp_path / "out"), n_steps=8)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "data:image" not in page and "src='example_2.png'" in page
    assert "3 of the heatmaps did not fit in this page" in page


def test_occlusion_on_digits_from_json_with_one_example(
    tmp_path: Path, digits_model: tuple[str, np.ndarray]
) -> None:
    path, digits = digits_model
    (tmp_path / "one.json").write_text(json.dumps({"instances": digits[0].tolist()}))
    found = explain_model(
        path, str(tmp_path / "one.json"), str(tmp_path / "out"), method="occlusion"
    )
    assert len(found.predictions) == 1 and np.asarray(found.attributions).shape == (1, 1, 8, 8)
    assert (tmp_path / "out" / "example_0.png").exists()


def test_tabular_examples_from_npy_get_a_table(tmp_path: Path) -> None:
    torch_file.save(
        linear([[1.0, 2.0, 3.0]], [0.0]),
        str(tmp_path / "model"),
        class_path="torch.nn:Linear",
        module_args={"in_features": 3, "out_features": 1},
        example=torch.ones(1, 3),
    )
    np.save(tmp_path / "x.npy", np.ones((40, 3)))
    found = explain_model(str(tmp_path / "model"), str(tmp_path / "x.npy"), str(tmp_path / "out"))
    assert len(found.targets) == 16  # max_examples
    assert found.attributions[0] == pytest.approx([1.0, 2.0, 3.0], abs=1e-5)
    assert "<table>" in (tmp_path / "out" / "index.html").read_text()
    assert not list((tmp_path / "out").glob("*.png"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"method": "shap"}, r"unknown explanation method 'shap' \(known methods: integrated_"),
        ({"n_steps": 0}, r"n_steps must be an integer >= 1 \(got 0\)"),
        ({"target": 2}, r"target 2 is not an output of the model: it has 2 outputs \(0 to 1\)"),
        ({"target": [0]}, r"target lists 1 outputs for 2 examples"),
        ({"method": "occlusion", "window": (2, 2)}, r"window \(2, 2\) does not fit .* \(3,\)"),
    ],
    ids=["method", "n_steps", "target", "targets", "window"],
)
def test_bad_options_are_named(options: dict[str, object], message: str) -> None:
    model = linear([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [0.0, 0.0])
    with pytest.raises(InvalidArgumentError, match=message):
        explain(model, torch.ones(2, 3), **options)  # type: ignore[arg-type]


def test_inputs_the_model_rejects_name_the_shape_it_expects(
    tmp_path: Path, digits_model: tuple[str, np.ndarray]
) -> None:
    path, _ = digits_model
    with pytest.raises(UserError) as caught:
        explain_model(path, np.zeros((3, 5)), str(tmp_path))
    said = str(caught.value)
    assert said.startswith("the model rejected inputs of shape (3, 5): ")
    assert said.endswith("; it expects (None, 1, 8, 8)") and "\n" not in said
    with pytest.raises(UserError, match=r"inputs must be numbers \(got an array of <U1\)"):
        explain(linear([[1.0]], [0.0]), [["a"]])
    with pytest.raises(InvalidArgumentError, match=r"max_examples must be an integer >= 1"):
        explain_model(path, np.zeros((3, 5)), str(tmp_path), max_examples=0)


def test_missing_or_unreadable_examples_are_named(
    tmp_path: Path, digits_model: tuple[str, np.ndarray]
) -> None:
    path, _ = digits_model
    with pytest.raises(UserError, match=r"examples '.*nowhere.npy' do not exist"):
        explain_model(path, str(tmp_path / "nowhere.npy"), str(tmp_path / "out"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(UserError, match=r"bad.npz' cannot be read as .npy, .npz or JSON"):
        explain_model(path, str(tmp_path / "bad.npz"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("")
    with pytest.raises(UserError, match=r"holds no .npz/.npy/.json file \(files: notes.txt\)"):
        explain_model(path, str(tmp_path / "empty"), str(tmp_path / "out"))
