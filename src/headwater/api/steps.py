"""Metrics over steps of runs: the series their tasks logged beside Metrics artifacts
(`headwater.log_step`, XGBoost's rounds, Lightning's epochs). Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.api._store import MetadataArg, reading
from headwater.api.runs import _find_run, _no_run

__all__ = ["StepSeries", "get_step_metrics"]


@dataclass(frozen=True)
class StepSeries:
    """One metric over steps of one task of a run.

    Attributes:
        run_id: The run.
        task: The task that logged it.
        name: The metric's name.
        artifact_id: The Metrics artifact it was logged beside.
        points: `(step, value)` in step order (None: a value that was not a finite number),
            at most `headwater.step_metrics.MAX_POINTS` of them.
        logged: How many points were logged (more than `len(points)` when cut).
    """

    run_id: str
    task: str
    name: str
    artifact_id: int
    points: list[tuple[int, float | None]]
    logged: int

    def to_json(self) -> dict[str, Any]:
        """The series as JSON: points as `[step, value]` pairs."""
        return {
            "run_id": self.run_id,
            "task": self.task,
            "name": self.name,
            "artifact_id": self.artifact_id,
            "points": [list(p) for p in self.points],
            "logged": self.logged,
        }


def get_step_metrics(run_ids: list[str], *, metadata: MetadataArg = None) -> list[StepSeries]:
    """The step metrics of runs, by run (in the order given), task (in the order they were
    recorded) and name.

    Args:
        run_ids: Run ids, or unique prefixes of them.
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Raises:
        NotFoundError: A run does not exist, or a prefix matches several.
        StorageError: The store cannot be opened for reading.
    """
    if not run_ids:
        return []
    with reading(metadata) as store:
        if store is None:
            raise _no_run(run_ids[0])
        ids = [_find_run(store, r).run_id for r in run_ids]
        found = store.list_step_metrics(ids)
        # Task names only: cheaper than get_run, which reads every task's artifacts too.
        tasks = {(e.run_id, e.id): e.task for run_id in ids for e in store.list_executions(run_id)}
    order = {run_id: n for n, run_id in enumerate(ids)}
    series = [
        StepSeries(
            run_id=s.run_id,
            task=tasks.get((s.run_id, s.execution_id), f"execution {s.execution_id}"),
            name=s.name,
            artifact_id=s.artifact_id,
            points=s.points,
            logged=s.logged,
        )
        for s in found
    ]
    # The store's order within a run: by execution (the order tasks ran in), then name.
    return sorted(series, key=lambda s: order[s.run_id])
