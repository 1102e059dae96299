"""KFP runs over Headwater runs: checking a submission, and a run's KFP JSON with its tasks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from headwater.errors import UserError
from headwater.server.store import KfpStore, Record
from headwater.server.wire import ApiError, rfc3339

if TYPE_CHECKING:
    from headwater.spec.ir import PipelineIR

__all__ = ["check_submission", "pipeline_of", "run_json", "split_spec", "task_state"]

#: Headwater task states -> KFP RuntimeState (a cached task is SKIPPED, as upstream shows it).
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


def split_spec(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """(pipeline spec, platform spec or None) of a stored `pipeline_spec`: either the IR
    itself or, for a package with a platform spec, `{"pipeline_spec", "platform_spec"}`."""
    if "root" not in doc and isinstance(doc.get("pipeline_spec"), Mapping):
        platform = doc.get("platform_spec")
        return doc["pipeline_spec"], platform if isinstance(platform, Mapping) else None
    return doc, None


def parse_spec(doc: Any) -> PipelineIR:
    """Raises ApiError 400 when `doc` is not a valid PipelineSpec Headwater runs."""
    from headwater.spec.ir import parse_pipeline

    if not isinstance(doc, Mapping):
        raise ApiError(400, "pipeline_spec must be a JSON object (a compiled PipelineSpec)")
    spec, platform = split_spec(doc)
    try:
        return parse_pipeline(spec, platform)
    except UserError as exc:
        raise ApiError(400, f"invalid pipeline_spec: {exc}") from exc


def pipeline_of(store: KfpStore, run: Record) -> tuple[PipelineIR, dict[str, Any], str]:
    """The pipeline, arguments and pipeline root (may be "") a run record asks for."""
    spec = run["pipeline_spec"]
    if spec is None:
        spec = store.version(run["pipeline_id"], run["pipeline_version_id"])["pipeline_spec"]
    config = run["runtime_config"] or {}
    return parse_spec(spec), dict(config.get("parameters") or {}), config.get("pipeline_root", "")


def check_submission(ir: PipelineIR, runtime_config: Any) -> None:
    """Raises ApiError 400 when the runtime config does not fit the pipeline's inputs."""
    from headwater.engine.runner import bind_arguments

    if not isinstance(runtime_config, Mapping):
        raise ApiError(400, "runtime_config must be an object {parameters, pipeline_root}")
    params = runtime_config.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise ApiError(400, "runtime_config.parameters must be an object of name: value")
    root = runtime_config.get("pipeline_root") or ""
    if not isinstance(root, str):
        raise ApiError(400, "runtime_config.pipeline_root must be a string (a path or URL)")
    artifacts = set(ir.root.interface.input_artifacts)
    try:
        bind_arguments(ir, {k: v for k, v in params.items() if k not in artifacts})
    except UserError as exc:
        raise ApiError(400, f"runtime_config.parameters: {exc}") from exc


def run_json(run: Record, *, metadata_url: str, details: bool) -> dict[str, Any]:
    """A run as KFP's `V2beta1Run` (with `run_details.task_details` if `details`)."""
    doc: dict[str, Any] = {
        "run_id": run["run_id"],
        "experiment_id": run["experiment_id"],
        "display_name": run["display_name"],
        "description": run["description"],
        "storage_state": run["storage_state"],
        "runtime_config": run["runtime_config"],
        "service_account": "",
        "created_at": rfc3339(run["created_at"]),
        "scheduled_at": rfc3339(run["scheduled_at"]),
        "finished_at": rfc3339(run["finished_at"]),
        "state": run["state"],
        "state_history": [],
    }
    if run["pipeline_spec"] is not None:
        doc["pipeline_spec"] = run["pipeline_spec"]
    else:
        doc["pipeline_version_reference"] = {
            "pipeline_id": run["pipeline_id"],
            "pipeline_version_id": run["pipeline_version_id"],
        }
    if run.get("recurring_run_id"):
        doc["recurring_run_id"] = run["recurring_run_id"]
    if run["error"]:
        doc["error"] = {"code": 2, "message": run["error"], "details": []}
    if details:
        doc["run_details"] = {"task_details": _tasks(run["run_id"], metadata_url)}
    return doc


def _tasks(run_id: str, metadata_url: str) -> list[dict[str, Any]]:
    """The run's tasks as KFP `PipelineTaskDetail`s ([] before a worker has started it)."""
    from headwater.api.runs import get_run
    from headwater.errors import NotFoundError

    try:
        details = get_run(run_id, metadata=metadata_url)
    except NotFoundError:
        return []
    tasks = []
    for task in details.tasks:
        entry: dict[str, Any] = {
            "run_id": run_id,
            "task_id": str(task.execution_id or task.name),
            "display_name": task.name,
            "create_time": rfc3339(task.started_at),
            "start_time": rfc3339(task.started_at),
            "end_time": rfc3339(task.finished_at),
            "state": task_state(task.state),
            "execution_id": str(task.execution_id or 0),
            "parent_task_id": "",
            "child_tasks": [],
        }
        if task.error:
            entry["error"] = {
                "code": 2,
                "message": str(task.error.get("message") or task.error),
                "details": [],
            }
        tasks.append(entry)
    return tasks + _loops(tasks)


def _loops(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One task per loop, whose `child_tasks` are its iterations (`add[0]`, `add[1]` are
    children of `add`); each iteration's `parent_task_id` names it. Its state is FAILED if an
    iteration failed, RUNNING while one has not ended, else SUCCEEDED."""
    import re

    groups: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        match = re.fullmatch(r"(.+?)((?:\[\d+\])+)", task["display_name"])
        if match:
            groups.setdefault(match.group(1), []).append(task)
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
