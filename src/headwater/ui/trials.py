"""The trials of a tuning run (`headwater.hpo.tune`), read from its tasks: a table and the
objective by trial with the best so far.

Nothing is stored for this: a trial is a task of the trial wrapper (`hpo.trials`), whose
input `trial` is `{"trial_index", "parameters"}` and whose output is `{"trial_index",
"objective"}` (a number, or the train component's dict of metrics holding the objective) or
`{"trial_index", "error"}`. The objective's name and direction are the inputs of the
tuning's `create-experiment` task; without one, the objective is a trial's number and the
direction unknown (no best so far is drawn).
"""

from __future__ import annotations

import math
from typing import Any

from headwater.api.runs import RunDetails, TaskDetails
from headwater.task import split_iterations

__all__ = ["trials_view"]

#: Trials shown in the table and drawn (a tuning of more is cut to its first this many).
MAX_TRIALS = 500


def _loop(task: str) -> str:
    """The loop (one per round) a trial ran in: "tune.train-trial-2[3]" -> "tune.train-trial-2"."""
    _, indices = split_iterations(task)
    return task[: task.rindex("[")] if indices else task


def trials_view(run: RunDetails) -> dict[str, Any] | None:
    """The run's trials, or None when it ran none.

    Returns:
        `{"objective", "minimize" (None: unknown), "parameters" (names), "trials": [{"trial",
        "round", "task", "parameters", "objective", "status", "error", "best_so_far"}],
        "best" (the best trial's number or None), "count", "shown"}`, trials in trial order.
        `status` is COMPLETED, FAILED (with `error`), or the task's state while it has no
        result (RUNNING, CANCELED, ...).
    """
    found = [(t, _trial_input(t)) for t in run.tasks]
    trial_tasks = [(t, item) for t, item in found if item is not None]
    if not trial_tasks:
        return None
    objective, minimize = _objective(run.tasks)
    loops = sorted(
        {_loop(t.name) for t, _ in trial_tasks},
        key=lambda loop: min(i["trial_index"] for t, i in trial_tasks if _loop(t.name) == loop),
    )
    rounds = {loop: n + 1 for n, loop in enumerate(loops)}
    trials = []
    for task, item in sorted(trial_tasks, key=lambda ti: ti[1]["trial_index"]):
        value, status, error = _result(task, objective)
        trials.append(
            {
                "trial": item["trial_index"],
                "round": rounds[_loop(task.name)],
                "task": task.name,
                "parameters": item.get("parameters") or {},
                "objective": value,
                "status": status,
                "error": error,
            }
        )
    count = len(trials)
    trials = trials[:MAX_TRIALS]
    best: int | None = None
    best_value: float | None = None
    for trial in trials:
        value = trial["objective"]
        if _better(value, best_value, minimize):
            best, best_value = trial["trial"], value
        trial["best_so_far"] = best_value
    names = sorted({k for t in trials for k in t["parameters"]})
    return {
        "objective": objective or "objective",
        "minimize": minimize,
        "parameters": names,
        "trials": trials,
        "best": best,
        "count": count,
        "shown": len(trials),
    }


def _better(value: float | None, best: float | None, minimize: bool | None) -> bool:
    """Whether `value` beats the best so far (never when the direction is unknown)."""
    if minimize is None or value is None:
        return False
    return best is None or (value < best if minimize else value > best)


def _trial_input(task: TaskDetails) -> dict[str, Any] | None:
    item = task.inputs.get("trial")
    if not isinstance(item, dict) or not isinstance(item.get("parameters", {}), dict):
        return None
    index = item.get("trial_index")
    if isinstance(index, float) and index.is_integer():
        index = int(index)  # through KFP every number may arrive as a double
    if isinstance(index, bool) or not isinstance(index, int):
        return None
    return {**item, "trial_index": index}


def _objective(tasks: list[TaskDetails]) -> tuple[str | None, bool | None]:
    """The objective and whether it is minimized, from `create-experiment`'s inputs."""
    for task in tasks:
        name = task.name.rsplit(".", 1)[-1]
        if name == "create-experiment" and isinstance(task.inputs.get("objective"), str):
            minimize = task.inputs.get("minimize")
            return task.inputs["objective"], minimize if isinstance(minimize, bool) else None
    return None, None


def _result(task: TaskDetails, objective: str | None) -> tuple[float | None, str, str | None]:
    """(objective value, status, error) of a trial's task."""
    out = task.outputs.get("Output")
    if not isinstance(out, dict):
        return None, task.state if task.state != "SUCCEEDED" else "FAILED", _task_error(task)
    if "error" in out:
        return None, "FAILED", str(out["error"])
    value = out.get("objective")
    if isinstance(value, dict):
        value = value.get(objective) if objective else None
        if value is None:
            return None, "FAILED", f"did not report the objective {objective!r}"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, "FAILED", f"objective is {value!r}, not a finite number"
    return float(value), "COMPLETED", None


def _task_error(task: TaskDetails) -> str | None:
    if task.error:
        return f"{task.error.get('error_type', 'Error')}: {task.error.get('message', '')}"
    return None
