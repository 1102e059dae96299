"""Headwater's records as KFP's v2beta1 resources: runs (with their tasks), experiments,
pipelines, versions and recurring runs, as `kfp.Client` reads them.

One record each: a KFP run is a Headwater run (`RunRecord`), read through the same store
`headwater runs show` reads; nothing here is stored twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from headwater.metadata.base import (
    ExperimentRecord,
    PipelineRecord,
    RecurringRunRecord,
    RunRecord,
    VersionRecord,
)
from headwater.server.kfp.wire import kfp_state, rfc3339, rpc_status
from headwater.task import split_iterations

if TYPE_CHECKING:
    from headwater.api.runs import RunDetails, TaskDetails

__all__ = [
    "experiment_json",
    "pipeline_json",
    "recurring_json",
    "run_json",
    "spec_of",
    "task_details",
    "task_state",
    "version_json",
]

#: Headwater task states -> KFP RuntimeState. A cached task is SKIPPED ("skipped, for example
#: due to caching", as upstream reports a cache hit) with its times and outputs; a task of a
#: branch not taken is SKIPPED with neither (it never ran).
_TASK_STATES = {
    "PENDING": "PENDING",
    "READY": "PENDING",
    "RUNNING": "RUNNING",
    "SUCCEEDED": "SUCCEEDED",
    "CACHED": "SKIPPED",
    "SKIPPED": "SKIPPED",
    "FAILED": "FAILED",
    "CANCELED": "CANCELED",
}


def task_state(state: str) -> str:
    """A Headwater task state as a KFP `V2beta1RuntimeState` name."""
    return _TASK_STATES.get(state, "RUNTIME_STATE_UNSPECIFIED")


def spec_of(ir: Mapping[str, Any]) -> dict[str, Any]:
    """The `pipeline_spec` KFP echoes for a stored IR: the IR itself, or for one with a
    platform spec `{pipeline_spec, platform_spec}`, as `kfp.Client` sent it."""
    platforms = ir.get("platforms")
    if not platforms:
        return dict(ir)
    spec = {k: v for k, v in ir.items() if k != "platforms"}
    return {"pipeline_spec": spec, "platform_spec": {"platforms": platforms}}


def experiment_json(row: ExperimentRecord) -> dict[str, Any]:
    """An experiment as `V2beta1Experiment`."""
    return {
        "experiment_id": row.experiment_id,
        "display_name": row.display_name,
        "description": row.description,
        "namespace": row.namespace,
        "storage_state": row.storage_state,
        "created_at": rfc3339(row.created_at),
        "created_by": row.created_by or "",
    }


def pipeline_json(row: PipelineRecord) -> dict[str, Any]:
    """A named pipeline as `V2beta1Pipeline`."""
    return {
        "pipeline_id": row.pipeline_id,
        "display_name": row.display_name,
        "name": row.display_name,
        "description": row.description,
        "namespace": row.namespace,
        "created_at": rfc3339(row.created_at),
        "created_by": row.created_by or "",
    }


def version_json(row: VersionRecord) -> dict[str, Any]:
    """An uploaded version as `V2beta1PipelineVersion`, with its spec."""
    return {
        "pipeline_id": row.pipeline_id or "",
        "pipeline_version_id": row.pipeline_version_id,
        "display_name": row.display_name,
        "name": row.display_name,
        "description": row.description,
        "created_at": rfc3339(row.created_at),
        "pipeline_spec": spec_of(row.ir),
        "created_by": row.created_by or "",
    }


def _pipeline_of(
    doc: dict[str, Any], pipeline_id: str | None, version_id: str, ir: Mapping[str, Any] | None
) -> None:
    """A run's (or recurring run's) pipeline: a reference to an uploaded version, else the
    spec itself, as it was submitted."""
    if pipeline_id:
        doc["pipeline_version_reference"] = {
            "pipeline_id": pipeline_id,
            "pipeline_version_id": version_id,
        }
    elif ir is not None:
        doc["pipeline_spec"] = spec_of(ir)


def run_json(
    run: RunRecord,
    *,
    ir: Mapping[str, Any] | None,
    resumed_up_to: int,
    details: RunDetails | None = None,
) -> dict[str, Any]:
    """A run as `V2beta1Run`; with `details`, `run_details.task_details` too.

    Args:
        run: The run.
        ir: Its version's IR, echoed as `pipeline_spec` unless the version was uploaded.
        resumed_up_to: Worker starts a queue gives a run (`kfp_state`).
        details: The run's tasks (`headwater.api.runs.get_run`).
    """
    doc: dict[str, Any] = {
        "run_id": run.run_id,
        "experiment_id": run.experiment_id or "",
        "display_name": run.display_name,
        "description": run.description,
        "storage_state": run.storage_state,
        "runtime_config": {"parameters": run.parameters, "pipeline_root": run.pipeline_root},
        "service_account": "",
        "created_at": rfc3339(run.created_at),
        "scheduled_at": rfc3339(run.scheduled_at),
        "finished_at": rfc3339(run.finished_at),
        "state": kfp_state(run, resumed_up_to=resumed_up_to),
        "state_history": [],
        "created_by": run.created_by or "",
    }
    _pipeline_of(doc, run.pipeline_id, run.pipeline_version_id, ir)
    if run.recurring_run_id:
        doc["recurring_run_id"] = run.recurring_run_id
    if run.error:
        doc["error"] = rpc_status(_message(run.error))
    if details is not None:
        doc["run_details"] = {"task_details": task_details(run.run_id, details)}
    return doc


def _message(error: Mapping[str, Any]) -> str:
    text = str(error.get("message") or error)
    task = error.get("task")
    return f"{task}: {text}" if task else text


def recurring_json(row: RecurringRunRecord, version: VersionRecord | None) -> dict[str, Any]:
    """A recurring run as `V2beta1RecurringRun`."""
    doc: dict[str, Any] = {
        "recurring_run_id": row.recurring_run_id,
        "display_name": row.display_name,
        "description": row.description,
        "runtime_config": row.runtime_config,
        "service_account": "",
        "max_concurrency": str(row.max_concurrency),
        "trigger": row.trigger,
        "mode": "ENABLE" if row.status == "ENABLED" else "DISABLE",
        "status": row.status,
        "created_at": rfc3339(row.created_at),
        "updated_at": rfc3339(row.updated_at),
        "no_catchup": row.no_catchup,
        "namespace": row.namespace,
        "experiment_id": row.experiment_id or "",
        "created_by": row.created_by or "",
    }
    _pipeline_of(
        doc,
        version.pipeline_id if version else None,
        row.pipeline_version_id,
        version.ir if version else None,
    )
    return doc


def task_details(run_id: str, details: RunDetails) -> list[dict[str, Any]]:
    """A run's tasks as KFP's `PipelineTaskDetail`s, each with the ids of the artifacts it
    read and wrote by name, and one task per loop whose `child_tasks` are its iterations."""
    tasks = [_task(run_id, t) for t in details.tasks]
    return tasks + _loops(tasks)


def _task(run_id: str, task: TaskDetails) -> dict[str, Any]:
    task_id = str(task.execution_id or task.name)
    entry: dict[str, Any] = {
        "run_id": run_id,
        "task_id": task_id,
        "display_name": task.name,
        "create_time": rfc3339(task.started_at),
        "start_time": rfc3339(task.started_at),
        "end_time": rfc3339(task.finished_at),
        "state": task_state(task.state),
        "execution_id": str(task.execution_id or 0),
        "inputs": _artifact_lists(task.input_artifact_ids),
        "outputs": _artifact_lists(task.output_artifact_ids),
        "parent_task_id": "",
        "child_tasks": [],
        "state_history": _history(task),
    }
    if task.error:
        entry["error"] = rpc_status(str(task.error.get("message") or task.error))
    return entry


def _artifact_lists(ids: Mapping[str, list[int]]) -> dict[str, Any]:
    # int64s travel as strings, as upstream's protojson writes them.
    return {name: {"artifact_ids": [str(i) for i in found]} for name, found in ids.items()}


def _history(task: TaskDetails) -> list[dict[str, Any]]:
    history = []
    if task.started_at is not None and task.state != "CACHED":
        history.append({"update_time": rfc3339(task.started_at), "state": "RUNNING"})
    if task.finished_at is not None:
        history.append({"update_time": rfc3339(task.finished_at), "state": task_state(task.state)})
    return history


def _loops(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One task per loop, whose `child_tasks` are its iterations (`add[0]`, `add[1]` are
    children of `add`); each iteration's `parent_task_id` names it. Its state is FAILED if an
    iteration failed, else CANCELED if one was canceled, else RUNNING while one has not
    ended, else SUCCEEDED."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        base, indices = split_iterations(task["display_name"])
        if indices:
            groups.setdefault(base, []).append(task)
    loops = []
    for name, children in groups.items():
        states = {c["state"] for c in children}
        state = (
            "FAILED"
            if "FAILED" in states
            else "CANCELED"
            if "CANCELED" in states
            else "RUNNING"
            if states & {"PENDING", "RUNNING", "RUNTIME_STATE_UNSPECIFIED"}
            else "SUCCEEDED"
        )
        for child in children:
            child["parent_task_id"] = f"loop:{name}"
        loops.append(
            {
                "task_id": f"loop:{name}",
                "display_name": name,
                "run_id": children[0]["run_id"],
                "create_time": min(c["create_time"] for c in children),
                "start_time": min(c["start_time"] for c in children),
                "end_time": rfc3339(None)
                if state == "RUNNING"
                else max(c["end_time"] for c in children),
                "state": state,
                "parent_task_id": "",
                "child_tasks": [{"task_id": c["task_id"]} for c in children],
            }
        )
    return loops
