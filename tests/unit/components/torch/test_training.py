"""`train`: a real Lightning fit in this process, its artifacts, one clear error per bad input."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from headwater.components.torch.digits import prepare
from headwater.components.torch.training import TrainSpec, coerce, train
from headwater.errors import InvalidArgumentError, UserError
from headwater.models import torch_file

MODULE = "headwater.components.torch.digits:DigitsClassifier"
DATA_MODULE = "headwater.components.torch.digits:DigitsDataModule"
FAST = {"max_epochs": 2, "enable_model_summary": False}


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("digits") / "data"
    prepare(str(path))
    return str(path)


def spec(tmp_path: Path, digits: str, **overrides: object) -> TrainSpec:
    fields: dict[str, object] = {
        "module": MODULE,
        "data_module": DATA_MODULE,
        "data_path": digits,
        "module_args": {"lr": 0.003},
        "trainer_args": dict(FAST),
        "model_dir": str(tmp_path / "model"),
        "checkpoint_path": str(tmp_path / "model.ckpt"),
        "tensorboard_dir": str(tmp_path / "tb"),
    }
    fields.update(overrides)
    return TrainSpec(**fields)  # type: ignore[arg-type]


def test_training_writes_model_checkpoint_logs_and_classifier_metrics(
    tmp_path: Path, digits: str
) -> None:
    result = train(spec(tmp_path, digits))
    # What the module logged while fitting and testing, and the objective it names.
    assert {"train_loss", "val_loss", "val_acc", "test_acc", "accuracy"} <= set(result.metrics)
    assert result.objective == result.metrics["val_acc"]
    assert result.metrics["epochs"] == 2
    # Each epoch's values over steps: the validation metrics of epochs 0 and 1, the last
    # equal to what fitting ended with (test values came after).
    history = result.history
    assert [p[0] for p in history["val_acc"]] == [0, 1]
    assert [p[0] for p in history["val_loss"]] == [0, 1]
    assert history["val_acc"][-1][1] == pytest.approx(result.metrics["val_acc"])
    assert "test_acc" not in history
    # The confusion matrix covers the whole test split and agrees with the accuracy.
    scored = result.classification
    assert scored is not None and scored["categories"] == [str(d) for d in range(10)]
    matrix = np.array(scored["confusion_matrix"])
    assert matrix.sum() == scored["examples"] == 359
    assert np.trace(matrix) / matrix.sum() == pytest.approx(scored["accuracy"])
    assert scored["roc"] is None  # ten classes: no ROC
    # The Model: state dict, TorchScript, and the metadata to rebuild it.
    meta = torch_file.metadata(str(tmp_path / "model"))
    assert meta["framework"] == "pytorch" and meta["class_path"] == MODULE
    assert meta["input"] == {"shape": [None, 1, 8, 8], "dtype": "float32"}
    assert meta["output"] == {"shape": [None, 10], "dtype": "float32"}
    assert meta["torchscript"] == "model.pt" and meta["lightning_version"]
    assert meta["device"] == "cpu"
    assert meta["module_args"] == {"lr": 0.003}
    rebuilt = torch_file.load(str(tmp_path / "model"))
    scripted = torch_file.load(str(tmp_path / "model" / "model.pt"))
    x = torch.rand(4, 1, 8, 8)
    with torch.no_grad():
        assert torch.allclose(rebuilt(x), scripted(x), atol=1e-5)
    # The checkpoint is Lightning's, and the TensorBoard logs are event files.
    checkpoint = torch.load(tmp_path / "model.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["epoch"] == 2 and "state_dict" in checkpoint
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_hyperparameters_override_module_args_and_strings_are_coerced(
    tmp_path: Path, digits: str
) -> None:
    # As KFP delivers a pipeline parameter placed inside a dict: a string.
    result = train(
        spec(
            tmp_path,
            digits,
            module_args={"lr": "0.5", "width": "4"},
            hyperparameters={"lr": "0.003"},
            trainer_args={"max_epochs": "1", "limit_train_batches": "0.5"},
            objective="test_acc",
        )
    )
    meta = json.loads((tmp_path / "model" / "metadata.json").read_text())
    assert meta["module_args"] == {"lr": 0.003, "width": 4}
    assert result.objective == result.metrics["test_acc"] and result.metrics["epochs"] == 1


def test_coerce_follows_the_signature() -> None:
    import lightning.pytorch as pl

    got = coerce(pl.Trainer.__init__, {"max_epochs": "3", "precision": "32", "devices": "1"})
    # precision and devices admit strings, so they stay as given.
    assert got == {"max_epochs": 3, "precision": "32", "devices": "1"}
    assert coerce(pl.Trainer.__init__, {"fast_dev_run": "true"}) == {"fast_dev_run": True}
    assert coerce(pl.Trainer.__init__, {"max_epochs": "three"}) == {"max_epochs": "three"}


def test_a_module_given_as_a_code_file_travels_with_the_model(tmp_path: Path, digits: str) -> None:
    code = tmp_path / "my_model.py"
    code.write_text(
        textwrap.dedent(
            """
            import torch
            from headwater.components.torch.digits import DigitsClassifier

            class Tiny(DigitsClassifier):
                def __init__(self, lr: float = 0.01, scale: float = 1.0) -> None:
                    super().__init__(lr=lr, width=4)
                    self.scale = scale
            """
        )
    )
    train(
        spec(tmp_path, digits, module="Tiny", code_path=str(code), trainer_args={"max_epochs": 1})
    )
    meta = torch_file.metadata(str(tmp_path / "model"))
    assert meta["class_path"] == "my_model.py:Tiny" and meta["code"] == "code"
    assert (tmp_path / "model" / "code" / "my_model.py").exists()
    code.unlink()  # the model no longer needs the original file
    loaded = torch_file.load(str(tmp_path / "model"))
    assert type(loaded).__name__ == "Tiny"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"trainer_args": {"max_epoch": 1}},
            "no argument 'max_epoch' (did you mean 'max_epochs'?)",
        ),
        (
            {"trainer_args": {"max_epochs": 1, "precision": "seventeen"}},
            "rejects precision='seventeen'",
        ),
        ({"trainer_args": {"logger": True}}, "'logger' cannot be given"),
        ({"module": "headwater.components.torch.digits:Missing"}, "defines no class 'Missing'"),
        ({"module": "no_such_package.models:Net"}, "cannot import 'no_such_package.models'"),
        ({"module_args": {"learning_rate": 0.1}}, "rejects module_args ['learning_rate']"),
        (
            {"data_module": "headwater.components.torch.digits:DigitsClassifier"},
            "is not a LightningDataModule",
        ),
        (
            {"objective": "val_f1", "trainer_args": {"max_epochs": 1}},
            "objective 'val_f1' was not logged",
        ),
    ],
    ids=[
        "unknown-key",
        "bad-value",
        "owned-key",
        "missing-class",
        "bad-module",
        "bad-module-arg",
        "not-a-datamodule",
        "objective-not-logged",
    ],
)
def test_bad_input_is_one_clear_error(
    tmp_path: Path, digits: str, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError) as caught:
        train(spec(tmp_path, digits, **overrides))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_class_missing_from_the_code_file_lists_what_is_there(
    tmp_path: Path, digits: str
) -> None:
    code = tmp_path / "nets.py"
    code.write_text("class NetA:\n    pass\n\nclass NetB:\n    pass\n")
    with pytest.raises(
        UserError, match=r"'nets.py' defines no class 'Net' .*classes there: NetA, NetB"
    ):
        train(spec(tmp_path, digits, module="Net", code_path=str(code)))


def test_data_whose_shape_the_model_rejects_names_the_shape(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    x = np.zeros((40, 1, 6, 6), dtype=np.float32)
    y = np.zeros(40, dtype=np.int64)
    np.savez(wrong / "digits.npz", x_train=x, y_train=y, x_val=x, y_val=y, x_test=x, y_test=y)
    with pytest.raises(UserError, match=r"the model rejected a batch of shape \(40, 1, 6, 6\)"):
        train(spec(tmp_path, str(wrong)))


@pytest.mark.parametrize("replicas", [0, -1, 1.5, True], ids=["zero", "negative", "float", "bool"])
def test_replicas_below_one_are_refused(tmp_path: Path, digits: str, replicas: object) -> None:
    with pytest.raises(InvalidArgumentError, match="replicas must be a whole number >= 1"):
        train(spec(tmp_path, digits), replicas=replicas)  # type: ignore[arg-type]


def test_the_pytorch_profiler_writes_a_trace_and_a_summary(tmp_path: Path, digits: str) -> None:
    import gzip

    trace, summary = tmp_path / "trace.json.gz", tmp_path / "summary.html"
    train(
        spec(
            tmp_path,
            digits,
            trainer_args={"max_epochs": 1, "profiler": "pytorch"},
            trace_path=str(trace),
            summary_path=str(summary),
        )
    )
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert any(str(e.get("name", "")).startswith("aten::") for e in events)
    assert "aten::" in summary.read_text() and "ui.perfetto.dev" in summary.read_text()


def test_coerce_reads_an_inherited_init() -> None:
    from headwater.components.torch.digits import DigitsClassifier

    class Wider(DigitsClassifier):
        pass

    assert coerce(Wider, {"lr": "0.01", "width": "8"}) == {"lr": 0.01, "width": 8}
