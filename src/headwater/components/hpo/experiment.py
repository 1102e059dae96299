"""An Ax experiment in one JSON file: create it, suggest trials, complete them with results.

The file is Ax's own snapshot (`Client.save_to_json_file`; `ax.Client.load_from_json_file`
reads it back) plus a `"headwater"` entry Ax ignores: the objective, the seed, which round
each trial belongs to, the best trial so far and the last report. Each function reads the
file, does one step with Ax's 1.x `Client` and writes the file (or `out`), so the steps can
run in separate tasks, processes or machines; nothing else is shared between them::

    create_experiment("exp.json", space, "loss", minimize=True, initialization_trials=4)
    for round_number in range(3):
        trials = suggest_trials("exp.json", 4)            # [{"trial_index", "parameters"}]
        results = [{"trial_index": t["trial_index"], "objective": f(**t["parameters"])}
                   for t in trials]                       # or {"trial_index", "error": "..."}
        done = complete_trials("exp.json", results)       # done.best_parameters, .report

The first `initialization_trials` trials are quasi-random (Sobol, the centre of the space
first); after that each suggestion comes from a BoTorch model fitted on every completed
trial, with the still-running ones taken as pending.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.components.hpo import search_space as spaces
from headwater.components.hpo._library import ax
from headwater.components.hpo.report import render
from headwater.errors import InvalidArgumentError, UserError

#: The key of Headwater's own state in the snapshot (Ax reads only its own keys).
STATE_KEY = "headwater"
_ERROR_CHARS = 300


@dataclass(frozen=True)
class Completion:
    """What `complete_trials` found: the best trial so far and the trials of this batch."""

    #: The best observed trial's parameters ({} while no trial has completed).
    best_parameters: dict[str, Any]
    #: Its objective value (nan while no trial has completed or none is feasible).
    best_objective: float
    best_trial: int | None
    completed: list[int] = field(default_factory=list)
    #: {trial_index: error} of the trials of this batch that failed.
    failed: dict[int, str] = field(default_factory=dict)
    #: A Markdown report of every trial of the experiment.
    report: str = ""


def check_schedule(rounds: int, trials_per_round: int, max_rounds: int | None = None) -> None:
    """Refuse a tuning schedule of fewer than one round or trial, or more rounds than built.

    Raises:
        InvalidArgumentError: Naming the value and the valid range.
    """
    for name, value in (("rounds", rounds), ("trials_per_round", trials_per_round)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name} must be a whole number >= 1, got {value!r}")
    if max_rounds is not None and rounds > max_rounds:
        raise InvalidArgumentError(
            f"rounds={rounds}, but this pipeline was built with at most {max_rounds} rounds: "
            f"give rounds <= {max_rounds}, or build it with tune(..., max_rounds={rounds})"
        )


def create_experiment(
    path: str | Path,
    parameters: Sequence[Mapping[str, Any]],
    objective: str,
    *,
    minimize: bool = False,
    outcome_constraints: Sequence[str] = (),
    parameter_constraints: Sequence[str] = (),
    seed: int | None = None,
    initialization_trials: int | None = None,
    name: str | None = None,
) -> None:
    """Write a new experiment to `path`.

    Args:
        path: The JSON file to write.
        parameters: The search space (see `headwater.components.hpo.search_space`).
        objective: The name of the one metric to optimize, as the trials report it.
        minimize: Minimize the objective (default: maximize).
        outcome_constraints: Ax constraints on other reported metrics, e.g. "latency <= 20".
        parameter_constraints: Ax constraints between parameters, e.g. "x1 + x2 <= 1".
        seed: Makes the suggestions reproducible.
        initialization_trials: Quasi-random trials before the model takes over (default: 5,
            Ax's). Give the trials per round to make the whole first round quasi-random.
        name: The experiment's name.

    Raises:
        InvalidArgumentError: A parameter, the objective or a constraint Ax rejects; the
            message names it.
    """
    space = spaces.normalize(parameters)
    _check_objective_name(objective)
    if initialization_trials is not None and initialization_trials < 1:
        raise InvalidArgumentError(
            f"initialization_trials must be >= 1, got {initialization_trials!r}"
        )
    api = ax()
    with _ax_errors(lambda exc: _search_space_error(space, exc)):
        client = api.Client(random_seed=seed)
        client.configure_experiment(
            parameters=spaces.to_ax(space),
            parameter_constraints=list(parameter_constraints) or None,
            name=name,
        )
    with _ax_errors(lambda exc: _objective_error(objective, outcome_constraints, exc)):
        client.configure_optimization(
            objective=f"-{objective}" if minimize else objective,
            outcome_constraints=list(outcome_constraints) or None,
        )
    metric_names = list(_experiment(client).optimization_config.objective.metric_names)
    if metric_names != [objective]:
        raise InvalidArgumentError(
            f"objective {objective!r} must be one metric name, but Ax reads it as "
            f"{metric_names!r}; tune one metric (and constrain others with outcome_constraints)"
        )
    client.configure_generation_strategy(
        initialization_budget=initialization_trials,
        initialization_random_seed=seed,
    )
    state = {
        "objective": objective,
        "minimize": bool(minimize),
        "seed": seed,
        "parameters": space,
        "rounds": 0,
        "trial_rounds": {},
        "best": None,
        "report": "",
    }
    _save(client, state, Path(path))


def suggest_trials(
    path: str | Path, n: int, *, out: str | Path | None = None
) -> list[dict[str, Any]]:
    """Start up to `n` new trials and return them as `[{"trial_index", "parameters"}]`.

    Ax may hand out fewer trials per call than asked (at the end of the quasi-random phase,
    say); this asks again until it has `n` or Ax has none left to give (a small discrete
    space can run out). `n` <= 0 starts none and does not import Ax.

    Args:
        path: The experiment file.
        n: How many trials to start (one round).
        out: Where to write the updated experiment (default: `path`).
    """
    target = Path(out) if out is not None else Path(path)
    if n <= 0:
        _copy(Path(path), target)
        return []
    client, state = _load(Path(path))
    from ax.utils.common.random import with_rng_seed

    round_number = int(state["rounds"]) + 1
    seed = state.get("seed")
    trials: dict[int, dict[str, Any]] = {}
    while len(trials) < n:
        # A seed per call: reproducible, yet each round draws differently.
        with with_rng_seed(None if seed is None else int(seed) + len(state["trial_rounds"])):
            got = client.get_next_trials(max_trials=n - len(trials))
        if not got:
            break
        for index, params in got.items():
            trials[int(index)] = dict(params)
            state["trial_rounds"][str(index)] = round_number
    if trials:
        state["rounds"] = round_number
    _save(client, state, target)
    return [{"trial_index": i, "parameters": p} for i, p in sorted(trials.items())]


def complete_trials(
    path: str | Path,
    results: Sequence[Mapping[str, Any]],
    *,
    out: str | Path | None = None,
) -> Completion:
    """Record the results of running trials and find the best trial so far.

    Each result is `{"trial_index": i, "objective": value}`, where value is the objective's
    number or a dict of metric values (the objective and any metric an outcome constraint
    names), or `{"trial_index": i, "error": "what went wrong"}` for a trial that failed. A
    trial whose value is not a finite number, or lacks the objective, is marked failed too.
    No results at all leaves the experiment as it was (and does not import Ax).

    Args:
        path: The experiment file.
        results: One result per trial of the batch.
        out: Where to write the updated experiment (default: `path`).

    Raises:
        InvalidArgumentError: A result for a trial that is not running, a malformed result,
            or an objective that no trial of the batch reported.
        UserError: Every trial of the batch failed; the message names each trial's error.
            The updated experiment is written first.
    """
    target = Path(out) if out is not None else Path(path)
    if not results:
        state = _read_state(Path(path))
        _copy(Path(path), target)
        return _completion(state, [], {})
    client, state = _load(Path(path))
    objective = str(state["objective"])
    parsed = [_parse_result(r, client, objective) for r in results]
    indices = [index for index, _, _ in parsed]
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        raise InvalidArgumentError(
            f"two results for trial {twice[0]}: give each trial that suggest_trials started "
            "exactly one result"
        )
    reported = [m for _, m, _ in parsed if m is not None]
    if reported and not any(objective in m for m in reported):
        seen = sorted({k for m in reported for k in m})
        raise InvalidArgumentError(
            f"no trial reported the objective {objective!r} (they reported "
            f"{', '.join(map(repr, seen))}): name one of those as the objective, or make the "
            "train component report it"
        )
    completed: list[int] = []
    failed: dict[int, str] = {}
    for index, metrics, error in parsed:
        if metrics is not None and objective not in metrics:
            error = f"did not report the objective {objective!r} (reported {sorted(metrics)!r})"
        if error is not None:
            failed[index] = error
            client.mark_trial_failed(index, failed_reason=error)
        else:
            client.complete_trial(index, raw_data=metrics)
            completed.append(index)
    summary = client.summarize()
    rows: list[dict[str, Any]] = summary.to_dict("records") if len(summary) else []
    state["best"] = _best(client, state, rows)
    state["report"] = render(rows, state)
    _save(client, state, target)
    if not completed:
        rounds = sorted({state["trial_rounds"].get(str(i)) for i in failed} - {None})
        where = f"round {rounds[0]}" if len(rounds) == 1 else "this batch"
        errors = "; ".join(f"trial {i}: {e}" for i, e in sorted(failed.items()))
        raise UserError(f"every trial of {where} failed ({len(failed)} of {len(failed)}): {errors}")
    return _completion(state, completed, failed)


def read_state(path: str | Path) -> dict[str, Any]:
    """Headwater's entry of an experiment file: objective, rounds, best trial, report."""
    return _read_state(Path(path))


# -- helpers ---------------------------------------------------------------------------------


def _parse_result(
    result: Mapping[str, Any], client: Any, objective: str
) -> tuple[int, dict[str, float] | None, str | None]:
    if not isinstance(result, Mapping) or "trial_index" not in result:
        raise InvalidArgumentError(
            f"a trial result must be a dict with 'trial_index' and 'objective' or 'error', "
            f"got {result!r:.100}"
        )
    raw_index = result["trial_index"]
    if not _number(raw_index) or not float(raw_index).is_integer():
        raise InvalidArgumentError(f"trial result has trial_index {raw_index!r}, not a number")
    index = int(raw_index)
    trial = _experiment(client).trials.get(index)
    if trial is None or not trial.status.is_running:
        state = "no such trial" if trial is None else f"it is {trial.status.name}"
        raise InvalidArgumentError(
            f"a result for trial {index}, which is not running ({state}): give each trial "
            "that suggest_trials started exactly one result"
        )
    error = result.get("error")
    if error:
        return index, None, str(error)[:_ERROR_CHARS]
    if "objective" not in result:
        raise InvalidArgumentError(
            f"the result of trial {index} has neither 'objective' nor 'error': {result!r:.100}"
        )
    value = result["objective"]
    metrics = dict(value) if isinstance(value, Mapping) else {objective: value}
    bad = {k: v for k, v in metrics.items() if not _number(v)}
    if bad:
        name, got = next(iter(bad.items()))
        return index, None, f"reported {name} = {got!r}, not a finite number"
    return index, {str(k): float(v) for k, v in metrics.items()}, None


def _experiment(client: Any) -> Any:
    # The Client has no public getter for its Experiment (trial statuses, metric names).
    return client._experiment


def _best(
    client: Any, state: Mapping[str, Any], rows: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The best observed trial that satisfies the outcome constraints, as Ax picks it; while
    none does, the best observed trial, marked `"feasible": False`."""
    objective = str(state["objective"])
    try:
        params, values, index, _ = client.get_best_parameterization(use_model_predictions=False)
        value = values.get(objective)
        mean = float(value[0] if isinstance(value, (tuple, list)) else value)
        if math.isfinite(mean):
            return {"parameters": dict(params), "objective": mean, "trial_index": int(index)}
    except Exception:  # Ax finds no trial meeting the outcome constraints (or none completed)
        pass
    done = [
        r for r in rows if str(r.get("trial_status")) == "COMPLETED" and _number(r.get(objective))
    ]
    if not done:
        return None
    pick = min if state.get("minimize") else max
    row = pick(done, key=lambda r: float(r[objective]))
    names = spaces.names(state["parameters"])
    return {
        "parameters": {n: _plain(row[n]) for n in names if n in row},
        "objective": float(row[objective]),
        "trial_index": int(row["trial_index"]),
        "feasible": False,
    }


def _plain(value: Any) -> Any:
    """A numpy scalar from a pandas row as the Python value Ax would have given."""
    return value.item() if hasattr(value, "item") else value


def _completion(
    state: Mapping[str, Any], completed: list[int], failed: dict[int, str]
) -> Completion:
    best = state.get("best") or {}
    return Completion(
        best_parameters=dict(best.get("parameters") or {}),
        best_objective=float(best["objective"]) if best else math.nan,
        best_trial=int(best["trial_index"]) if best else None,
        completed=completed,
        failed=failed,
        report=str(state.get("report") or ""),
    )


def _check_objective_name(objective: Any) -> None:
    if not isinstance(objective, str) or not objective.strip():
        raise InvalidArgumentError(f"objective must be a metric name, got {objective!r}")
    if objective.startswith("-"):
        raise InvalidArgumentError(
            f"objective {objective!r}: give the metric name and minimize=True instead of '-'"
        )


@contextmanager
def _ax_errors(explain: Any) -> Iterator[None]:
    """Turn what Ax raises for bad input into one InvalidArgumentError naming the culprit."""
    try:
        yield
    except InvalidArgumentError:
        raise
    except Exception as exc:
        raise explain(exc) from exc


def _search_space_error(space: list[dict[str, Any]], exc: Exception) -> InvalidArgumentError:
    detail = _first_line(exc)
    culprit = next((p["name"] for p in space if _alone_rejected(p)), None)
    if culprit is None:
        culprit = next((p["name"] for p in space if repr(p["name"])[1:-1] in detail), None)
    if culprit is None:
        return InvalidArgumentError(f"search space: Ax rejects it: {detail}")
    return InvalidArgumentError(f"search space: Ax rejects parameter {culprit!r}: {detail}")


def _alone_rejected(spec: dict[str, Any]) -> bool:
    try:
        ax().Client().configure_experiment(parameters=spaces.to_ax([spec]))
    except Exception:
        return True
    return False


def _objective_error(
    objective: str, constraints: Sequence[str], exc: Exception
) -> InvalidArgumentError:
    from ax.api.utils.instantiation.from_string import optimization_config_from_string

    for constraint in constraints:
        try:
            optimization_config_from_string(
                objective_str="objective", outcome_constraint_strs=[constraint]
            )
        except Exception as inner:
            return InvalidArgumentError(
                f"outcome constraint {constraint!r}: Ax cannot read it ({_first_line(inner)}); "
                "write it as 'metric >= number' or 'metric <= number'"
            )
    return InvalidArgumentError(
        f"objective {objective!r}: Ax cannot read it as a metric name ({_first_line(exc)})"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:_ERROR_CHARS]


def _number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _load(path: Path) -> tuple[Any, dict[str, Any]]:
    state = _read_state(path)
    client = ax().Client.load_from_json_file(str(path))
    return client, state


def _read_state(path: Path) -> dict[str, Any]:
    try:
        snapshot = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidArgumentError(f"no experiment file at {str(path)!r}") from exc
    except ValueError as exc:
        raise InvalidArgumentError(f"{str(path)!r} is not an experiment file (not JSON)") from exc
    state = snapshot.get(STATE_KEY) if isinstance(snapshot, dict) else None
    if not isinstance(state, dict):
        raise InvalidArgumentError(
            f"{str(path)!r} is not an experiment file made by create_experiment "
            f"(no {STATE_KEY!r} entry)"
        )
    return state


def _save(client: Any, state: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    client.save_to_json_file(str(path))
    snapshot = json.loads(path.read_text(encoding="utf-8"))
    snapshot[STATE_KEY] = state
    path.write_text(json.dumps(snapshot), encoding="utf-8")


def _copy(source: Path, target: Path) -> None:
    _read_state(source)  # refuse a file that is not an experiment, as Ax would
    if source.resolve() != target.resolve():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
