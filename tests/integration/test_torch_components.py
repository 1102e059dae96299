"""The PyTorch components in pipelines under `headwater run`: the digits example end to end,
the ParallelFor-of-trials pattern, and one clear error for a bad trainer argument."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, pipeline, run_ok

from headwater import get_step_metrics

pytest.importorskip("torch")
pytest.importorskip("lightning")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "digits_pytorch.py")


def _task(result: dict[str, Any], cli: Cli, name: str) -> dict[str, Any]:
    shown = cli.show(result["run_id"])
    for task in shown["tasks"]:
        if task["name"] == name:
            return dict(task)
    raise AssertionError(f"no task {name!r} in {[t['name'] for t in shown['tasks']]}")


def _artifact(cli: Cli, uri: str) -> dict[str, Any]:
    shown = cli("artifacts", "show", uri, "--json").json()
    assert isinstance(shown, dict)
    return shown


@pytest.mark.timeout(400)
def test_digits_example_trains_evaluates_and_registers(headwater: Cli) -> None:
    result = run_ok(headwater("run", EXAMPLE, "--json", timeout=380))
    accuracy = result["outputs"]["Output"]
    assert accuracy >= 0.95, result
    trained = _task(result, headwater, "train-lightning-2")
    outputs = {k: v[0] for k, v in trained["artifacts"]["outputs"].items()}
    # The Model: state dict, TorchScript and the metadata that rebuilds it.
    model = _artifact(headwater, outputs["model"])
    assert model["metadata"]["framework"] == "pytorch"
    assert model["metadata"]["input"] == {"shape": [None, 1, 8, 8], "dtype": "float32"}
    assert {"state_dict.pt", "model.pt", "metadata.json"} <= {
        p.name for p in Path(outputs["model"]).iterdir()
    }
    # TensorBoard event files, a Lightning checkpoint, the confusion matrix of the test split.
    assert list(Path(outputs["tensorboard"]).glob("events.out.tfevents.*"))
    assert Path(outputs["checkpoint"]).stat().st_size > 10_000
    matrix = _artifact(headwater, outputs["classification"])["metadata"]["confusionMatrix"]
    assert sum(sum(row["row"]) for row in matrix["rows"]) == 359
    metrics = _artifact(headwater, outputs["metrics"])["metadata"]
    assert metrics["epochs"] == 10 and 0 < metrics["val_loss"] < 1
    # Evaluation, explanation and registration ran on the trained model.
    evaluated = _task(result, headwater, "evaluate-lightning")
    assert evaluated["outputs"]["Output"] == pytest.approx(accuracy)
    explained = _task(result, headwater, "explain-model")
    assert explained["state"] == "SUCCEEDED" and explained["outputs"]["Output"] == 8
    registered = headwater("models", "list", "--json").json()
    assert [(m["name"], m["version"]) for m in registered] == [("digits-cnn", 1)]


@pytest.mark.timeout(300)
def test_a_parallel_for_of_trials_returns_each_objective(headwater: Cli) -> None:
    result = run_ok(headwater("run", pipeline("torch_trials"), "--json", timeout=280))
    best = result["outputs"]["Output"]
    assert set(best) == {"lr", "width", "objective"}
    assert best["lr"] in (0.003, 0.3) and 0 < best["objective"] <= 1
    shown = headwater.show(result["run_id"])
    trials = [t for t in shown["tasks"] if t["name"].startswith("train-lightning")]
    assert len(trials) == 2 and all(t["state"] == "SUCCEEDED" for t in trials), trials
    objectives = sorted(t["outputs"]["Output"] for t in trials)
    assert best["objective"] == pytest.approx(objectives[-1])
    # Each trial's epochs are recorded as metrics over steps, beside its Metrics artifact.
    steps = get_step_metrics([result["run_id"]], metadata=f"sqlite:///{headwater.home}/metadata.db")
    val_acc = {s.task: s.points for s in steps if s.name == "val_acc"}
    assert set(val_acc) == {t["name"] for t in trials}
    assert all([p[0] for p in points] == [0, 1] for points in val_acc.values()), val_acc
    assert sorted(points[-1][1] for points in val_acc.values()) == pytest.approx(objectives)


def test_a_trainer_argument_lightning_lacks_fails_the_task_naming_it(headwater: Cli) -> None:
    made = headwater(
        "run",
        pipeline("torch_one_training"),
        "--json",
        "--param",
        'trainer_args={"max_epoch": 1}',
        timeout=240,
    )
    assert made.returncode == 1, made.describe()
    lines = [line for line in made.stderr.splitlines() if "failed:" in line and "task" in line]
    assert lines and "no argument 'max_epoch' (did you mean 'max_epochs'?)" in lines[0], (
        made.describe()
    )


@pytest.fixture(autouse=True)
def _no_dask_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWATER_DASK_SCHEDULER", raising=False)


@pytest.mark.timeout(300)
def test_two_replicas_train_with_ddp_and_rank_zero_writes_the_model(tmp_path: Path) -> None:
    from headwater.components.torch.digits_data import prepare
    from headwater.components.torch.training import TrainSpec, train
    from headwater.models import torch_file

    prepare(str(tmp_path / "data"))
    result = train(
        TrainSpec(
            module="headwater.components.torch.digits:DigitsClassifier",
            data_module="headwater.components.torch.digits:DigitsDataModule",
            data_path=str(tmp_path / "data"),
            trainer_args={"max_epochs": 2, "enable_model_summary": False},
            model_dir=str(tmp_path / "model"),
            checkpoint_path=str(tmp_path / "model.ckpt"),
            objective="test_acc",
        ),
        replicas=2,
    )
    assert result.replicas == 2
    # Each rank sees half of the 1,258 training digits per epoch: 10 batches of 64, not 20.
    assert result.metrics["global_step"] == 2 * 10
    assert result.classification is not None and result.classification["examples"] == 359
    assert torch_file.metadata(str(tmp_path / "model"))["class_path"].endswith("DigitsClassifier")
    assert (tmp_path / "model.ckpt").exists()
