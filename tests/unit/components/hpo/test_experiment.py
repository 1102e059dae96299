"""The experiment file with real Ax, in this process: rounds of suggestions (Sobol, then
BoTorch), failed trials, the best trial, the report, and one clear error per bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.components.hpo import experiment as ex
from headwater.errors import InvalidArgumentError, UserError

pytest.importorskip("ax")

SPACE = [
    {"name": "x", "bounds": [0.0, 1.0], "parameter_type": "float"},
    {"name": "w", "bounds": [4, 64], "parameter_type": "int", "scaling": "log"},
]


def loss(parameters: dict[str, Any]) -> float:
    return float((parameters["x"] - 0.3) ** 2 + (parameters["w"] - 20) ** 2 / 1000)


@pytest.fixture
def make_experiment(tmp_path: Path) -> Callable[..., Path]:
    """Create an experiment file over SPACE minimizing 'loss' (3 quasi-random trials)."""

    def make(name: str = "exp.json", **kwargs: Any) -> Path:
        path = tmp_path / name
        options: dict[str, Any] = {"minimize": True, "seed": 0, "initialization_trials": 3}
        ex.create_experiment(path, kwargs.pop("space", SPACE), "loss", **{**options, **kwargs})
        return path

    return make


def run_round(path: Path, n: int, fail: Callable[[dict[str, Any]], bool] = lambda _: False):  # type: ignore[no-untyped-def]
    trials = ex.suggest_trials(path, n)
    results = [
        {"trial_index": t["trial_index"], "error": "ValueError: diverged"}
        if fail(t["parameters"])
        else {"trial_index": t["trial_index"], "objective": loss(t["parameters"])}
        for t in trials
    ]
    return trials, ex.complete_trials(path, results)


def test_rounds_go_sobol_then_botorch_past_a_failed_trial(
    make_experiment: Callable[..., Path],
) -> None:
    path = make_experiment()
    first, done = run_round(path, 3, fail=lambda p: p["x"] == 0.5)
    # The centre of the space comes first; Ax never tried it, so its failure is just recorded.
    assert first[0]["parameters"] == {"x": 0.5, "w": 16}
    assert done.failed == {0: "ValueError: diverged"} and done.completed == [1, 2]
    second, done = run_round(path, 3)
    assert [t["trial_index"] for t in second] == [3, 4, 5]
    assert all(isinstance(t["parameters"]["w"], int) for t in first + second)
    observed = {t["trial_index"]: loss(t["parameters"]) for t in first[1:] + second}
    best = min(observed, key=observed.__getitem__)
    assert done.best_trial == best
    assert done.best_objective == pytest.approx(observed[best])
    state = ex.read_state(path)
    assert state["rounds"] == 2
    assert state["trial_rounds"] == {"0": 1, "1": 1, "2": 1, "3": 2, "4": 2, "5": 2}
    report = done.report
    assert report.startswith("# Tuning: minimize loss\n\nBest: trial ")
    assert "6 trials in 2 rounds: 5 completed, 1 failed." in report
    assert "| 0 | 1 | CenterOfSearchSpace | FAILED | 0.5 | 16 |  | ValueError: diverged |" in report
    # Round 2 replaces the failed quasi-random trial, then the model takes over.
    assert "| 5 | 2 | MBM | COMPLETED |" in report
    # The file is Ax's own snapshot: Ax reads it back without Headwater.
    from ax import Client

    client = Client.load_from_json_file(str(path))
    assert len(client.summarize()) == 6


def test_the_same_seed_suggests_the_same_trials(make_experiment: Callable[..., Path]) -> None:
    suggested = []
    for name in ("a.json", "b.json"):
        path = make_experiment(name, initialization_trials=2)
        run_round(path, 2)
        suggested.append(ex.suggest_trials(path, 2))
    assert suggested[0] == suggested[1]


def test_metrics_reported_as_a_dict_feed_outcome_constraints(
    make_experiment: Callable[..., Path],
) -> None:
    path = make_experiment(outcome_constraints=["size <= 30"], initialization_trials=4)
    trials = ex.suggest_trials(path, 4)
    results = [
        {
            "trial_index": t["trial_index"],
            "objective": {"loss": loss(t["parameters"]), "size": t["parameters"]["w"]},
        }
        for t in trials
    ]
    done = ex.complete_trials(path, results)
    feasible = [r for r in results if r["objective"]["size"] <= 30]
    best = min(feasible, key=lambda r: r["objective"]["loss"])
    assert done.best_trial == best["trial_index"]


def test_no_results_and_no_trials_pass_the_experiment_through(
    make_experiment: Callable[..., Path], tmp_path: Path
) -> None:
    path = make_experiment()
    assert ex.suggest_trials(path, 0, out=tmp_path / "same.json") == []
    assert json.loads((tmp_path / "same.json").read_text()) == json.loads(path.read_text())
    done = ex.complete_trials(path, [], out=tmp_path / "again.json")
    assert done.best_trial is None and done.best_parameters == {}


def test_every_trial_failing_names_each_error(make_experiment: Callable[..., Path]) -> None:
    path = make_experiment()
    trials = ex.suggest_trials(path, 2)
    results = [
        {"trial_index": trials[0]["trial_index"], "error": "ValueError: diverged"},
        {"trial_index": trials[1]["trial_index"], "objective": float("nan")},
    ]
    with pytest.raises(UserError) as caught:
        ex.complete_trials(path, results)
    assert str(caught.value) == (
        "every trial of round 1 failed (2 of 2): trial 0: ValueError: diverged; "
        "trial 1: reported loss = nan, not a finite number"
    )
    # The failures are recorded before the error: the experiment can go on from here.
    assert ex.read_state(path)["report"].count("| FAILED |") == 2


def test_an_objective_no_trial_reports_is_named(make_experiment: Callable[..., Path]) -> None:
    path = make_experiment()
    trials = ex.suggest_trials(path, 2)
    results = [
        {"trial_index": t["trial_index"], "objective": {"val_loss": 1.0, "acc": 0.5}}
        for t in trials
    ]
    with pytest.raises(InvalidArgumentError) as caught:
        ex.complete_trials(path, results)
    assert str(caught.value).startswith(
        "no trial reported the objective 'loss' (they reported 'acc', 'val_loss')"
    )


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ([{"trial_index": 7, "objective": 1.0}], "a result for trial 7, which is not running"),
        ([{"objective": 1.0}], "a trial result must be a dict with 'trial_index'"),
        ([{"trial_index": 0}], "the result of trial 0 has neither 'objective' nor 'error'"),
        ([{"trial_index": 0, "objective": 1.0}] * 2, "two results for trial 0"),
    ],
    ids=["unknown-trial", "no-index", "no-value", "twice"],
)
def test_a_malformed_result_is_refused(
    make_experiment: Callable[..., Path], results: list[dict[str, Any]], message: str
) -> None:
    path = make_experiment()
    ex.suggest_trials(path, 1)
    with pytest.raises(InvalidArgumentError) as caught:
        ex.complete_trials(path, results)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {
                "space": [
                    {"name": "lr", "bounds": [0, 1], "parameter_type": "float", "step_size": 0.3}
                ]
            },
            "search space: Ax rejects parameter 'lr': The range of the parameter must be evenly "
            "divisible by the step size.",
        ),
        ({"outcome_constraints": ["size >> 3"]}, "outcome constraint 'size >> 3': Ax cannot read"),
        ({"objective": "loss + size"}, "objective 'loss + size' must be one metric name"),
        ({"objective": "-loss"}, "objective '-loss': give the metric name and minimize=True"),
        ({"initialization_trials": 0}, "initialization_trials must be >= 1, got 0"),
    ],
    ids=["step-size", "constraint", "expression", "minus", "no-initialization"],
)
def test_a_bad_experiment_is_refused_in_one_line(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    space = kwargs.pop("space", SPACE)
    objective = kwargs.pop("objective", "loss")
    with pytest.raises(InvalidArgumentError) as caught:
        ex.create_experiment(tmp_path / "exp.json", space, objective, **kwargs)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ((0, 4, None), "rounds must be a whole number >= 1, got 0"),
        ((3, 0, None), "trials_per_round must be a whole number >= 1, got 0"),
        ((5, 4, 3), "rounds=5, but this pipeline was built with at most 3 rounds"),
    ],
    ids=["no-rounds", "no-trials", "beyond-built"],
)
def test_a_bad_schedule_is_refused(schedule: tuple[int, int, int | None], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("(", r"\(")):
        ex.check_schedule(*schedule)


def test_a_file_that_is_not_an_experiment_is_named(tmp_path: Path) -> None:
    stray = tmp_path / "stray.json"
    stray.write_text("{}")
    with pytest.raises(InvalidArgumentError, match="is not an experiment file made by"):
        ex.suggest_trials(stray, 0)
