"""`headwater.hpo.tune` pipelines under `headwater run`: Bayesian rounds of parallel trials
in which a failed trial is recorded and the tuning goes on, the clear errors of a round that
failed whole and of a bad schedule, and the digits example at its smallest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, run_failed, run_ok, task_states

from headwater import get_run
from headwater.ui.trials import trials_view

pytest.importorskip("ax")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "tune_digits.py")


def _tasks(cli: Cli, run_id: str) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in cli.show(run_id)["tasks"]}


@pytest.mark.timeout(360)  # CI machines under load were 3.5x slower than this one
def test_two_rounds_go_on_past_a_failed_trial_and_return_the_best(tuner: Cli) -> None:
    made = tuner.run("hpo_quadratic")
    result = run_ok(made)
    assert task_states(result) == {
        name: "SUCCEEDED"
        for name in (
            "create-experiment",
            "suggest-trials",
            "quadratic-trial[0]",
            "quadratic-trial[1]",
            "complete-trials",
            "suggest-trials-2",
            "quadratic-trial-2[0]",
            "quadratic-trial-2[1]",
            "complete-trials-2",
            # Round 3 is built into the pipeline, but the run asks for 2: it passes through.
            "suggest-trials-3",
            "complete-trials-3",
        )
    } | {"quadratic-trial-3": "SKIPPED"}
    # Each round says where the tuning stands; the round not asked for is neither listed nor
    # counted, as pending or as succeeded.
    lines = made.stderr.splitlines()
    rounds = [x for x in lines if x.startswith("headwater: tuning round")]
    best = f"best so far loss={result['outputs']['best_objective']:.6g} (lowest) at x="
    assert [x.split(":")[1] for x in rounds] == [" tuning round 1 of 2", " tuning round 2 of 2"]
    assert rounds[0].startswith("headwater: tuning round 1 of 2: 1 of 2 trials completed, ")
    assert rounds[1].startswith("headwater: tuning round 2 of 2: 2 of 2 trials completed, ")
    assert best in rounds[1], made.stderr
    assert not any("trials-3" in x for x in lines), made.stderr
    assert re.search(r"SUCCEEDED in [0-9.]+s \(9 succeeded\)$", lines[-2]), made.stderr
    assert lines[-1] == (
        "headwater: 1 more tuning round built into the pipeline started no trials (the run "
        "asked for rounds=2): not counted above"
    ), made.stderr
    tasks = _tasks(tuner, result["run_id"])
    # Round 1 opens with the centre of the space, which this train component cannot train.
    first = tasks["quadratic-trial[0]"]["outputs"]["Output"]
    assert first == {"trial_index": 0, "error": "ValueError: diverged at x=0.5"}
    results = [
        tasks[f"quadratic-trial{r}[{i}]"]["outputs"]["Output"] for r in ("", "-2") for i in (0, 1)
    ]
    assert sorted(r["trial_index"] for r in results) == [0, 1, 2, 3]
    # Round 2 was suggested after round 1 completed: its parameters are new, and ints stay ints.
    suggested = tasks["suggest-trials-2"]["outputs"]["Output"]
    assert [t["trial_index"] for t in suggested] == [2, 3]
    assert all(isinstance(t["parameters"]["w"], int) for t in suggested)
    objectives = [r["objective"] for r in results if "objective" in r]
    outputs = result["outputs"]
    assert outputs["best_objective"] == pytest.approx(min(objectives))
    assert set(outputs["best_parameters"]) == {"x", "w"}
    report_uri = tasks["complete-trials-2"]["artifacts"]["outputs"]["report"][0]
    report = Path(report_uri).read_text()
    assert (
        "| 0 | 1 | CenterOfSearchSpace | FAILED | 0.5 | 16 |  | ValueError: diverged at x=0.5 |"
        in report
    )
    assert "4 trials in 2 rounds: 3 completed, 1 failed." in report
    # The experiment is Ax's own snapshot, with Headwater's rounds beside it.
    snapshot_uri = tasks["complete-trials-2"]["artifacts"]["outputs"]["updated_experiment"][0]
    snapshot = json.loads(Path(snapshot_uri).read_text())
    assert {"experiment", "generation_strategy"} <= set(snapshot)
    assert snapshot["headwater"]["trial_rounds"] == {"0": 1, "1": 1, "2": 2, "3": 2}
    # The UI's trials of this tuning: rounds from the loops, the objective and its direction
    # from create-experiment, the failed trial with its error, the best so far falling.
    view = trials_view(get_run(result["run_id"], metadata=f"sqlite:///{tuner.home}/metadata.db"))
    assert view is not None and (view["objective"], view["minimize"]) == ("loss", True)
    trials = view["trials"]
    assert [(t["trial"], t["round"], t["status"]) for t in trials] == [
        (0, 1, "FAILED"),
        (1, 1, "COMPLETED"),
        (2, 2, "COMPLETED"),
        (3, 2, "COMPLETED"),
    ]
    assert trials[0]["error"] == "ValueError: diverged at x=0.5"
    assert [t["objective"] for t in trials[1:]] == pytest.approx(
        [r["objective"] for r in sorted(results, key=lambda r: r["trial_index"])[1:]]
    )
    assert trials[-1]["best_so_far"] == pytest.approx(outputs["best_objective"])
    best = [t["best_so_far"] for t in trials[1:]]
    assert best == sorted(best, reverse=True)


def test_a_round_whose_trials_all_fail_ends_the_tuning_naming_their_errors(tuner: Cli) -> None:
    made = tuner.run("hpo_quadratic", "--param", "fail_all=true")
    result = run_failed(made)
    assert result["error"]["task"] == "complete-trials"
    lines = [line for line in made.stderr.splitlines() if line.startswith("headwater: task")]
    assert len(lines) == 1 and lines[0].startswith(
        "headwater: task 'complete-trials' failed: UserError: every trial of round 1 failed "
        "(2 of 2): trial 0: ValueError: diverged at x=0.5; trial 1: ValueError: diverged at x="
    ), made.describe()


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("rounds=0", "rounds must be a whole number >= 1, got 0"),
        ("trials_per_round=0", "trials_per_round must be a whole number >= 1, got 0"),
        ("rounds=4", "rounds=4, but this pipeline was built with at most 3 rounds"),
    ],
    ids=["no-rounds", "no-trials", "more-rounds-than-built"],
)
def test_a_bad_schedule_fails_the_first_task_in_one_line(
    headwater: Cli, param: str, message: str
) -> None:
    made = headwater.run("hpo_quadratic", "--param", param)
    run_failed(made)
    line = next(x for x in made.stderr.splitlines() if x.startswith("headwater: task"))
    assert line.startswith(
        f"headwater: task 'create-experiment' failed: InvalidArgumentError: {message}"
    ), made.describe()


@pytest.mark.timeout(240)
def test_the_digits_example_tunes_at_its_smallest(headwater: Cli) -> None:
    pytest.importorskip("lightning")
    trainer = {"max_epochs": 1, "enable_model_summary": False, "enable_progress_bar": False}
    result = run_ok(
        headwater(
            "run",
            EXAMPLE,
            "--json",
            "--param",
            "rounds=1",
            "--param",
            "trials_per_round=2",
            "--param",
            f"trainer_args={json.dumps(trainer)}",
            timeout=180,
        )
    )
    best = result["outputs"]["best_parameters"]
    assert set(best) == {"lr", "weight_decay", "width"} and isinstance(best["width"], int)
    assert 0 < result["outputs"]["best_objective"] <= 1
    states = task_states(result)
    trials = [n for n in states if "-trial" in n and "[" in n]
    assert sorted(trials) == [
        "tune-lightning.train-lightning-trial[0]",
        "tune-lightning.train-lightning-trial[1]",
    ]
    # Rounds 2.. of the unrolled pipeline start no trials when the run asks for one round.
    assert states["tune-lightning.suggest-trials-2"] == "SUCCEEDED"


@pytest.fixture
def tuner(headwater: Cli) -> Cli:
    """The CLI with room for 5 tasks that import Ax (5-9 s each on 2 busy cores, and a CI
    machine under load was 3.5x slower)."""
    return headwater._replace(timeout=300)


@pytest.fixture(autouse=True)
def _no_dask_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWATER_DASK_SCHEDULER", raising=False)
