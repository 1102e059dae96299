"""KFP's runs and recurring runs, and reading a task's artifact: routes that parse, call the run
operations (`server.operations`) or the store, and convert (`server.kfp.convert`)."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable
from typing import Any

from headwater.errors import InvalidArgumentError, NotFoundError
from headwater.metadata.base import RecurringRunRecord, RunRecord, VersionRecord
from headwater.metadata.reconcile import presented_run
from headwater.server.kfp.convert import recurring_json, run_json
from headwater.server.kfp.requests import Submission, body_object, submission
from headwater.server.kfp.wire import ListSpec
from headwater.server.operations import NewRun
from headwater.server.queue import MAX_STARTS
from headwater.server.resources import experiment, pipeline, version
from headwater.server.router import Call, Listing, ServerState, register_list, route, scoped


def _version_of(state: ServerState, sub: Submission, call: Call) -> VersionRecord | None:
    """The uploaded version a submission names (its pipeline's newest without a version id),
    which the principal must be able to read."""
    if sub.ir is not None:
        return None
    if sub.version_id:
        return version(state, sub.pipeline_id, sub.version_id, call)
    if state.store.get_pipeline(sub.pipeline_id) is not None:
        pipeline(state, sub.pipeline_id, call)
    found = state.store.latest_version(sub.pipeline_id)
    if found is None:
        if state.store.get_pipeline(sub.pipeline_id) is None:
            raise NotFoundError(f"no pipeline with id {sub.pipeline_id!r}")
        raise NotFoundError(f"pipeline {sub.pipeline_id} has no versions")
    return found


class _Versions:
    """The versions a page of runs points to, each read once."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._found: dict[str, VersionRecord | None] = {}

    def ir(self, run: RunRecord) -> dict[str, Any] | None:
        found = self.get(run.pipeline_version_id)
        return None if found is None else found.ir

    def get(self, version_id: str) -> VersionRecord | None:
        if version_id not in self._found:
            self._found[version_id] = self.state.store.get_version(version_id)
        return self._found[version_id]


def runs_json(state: ServerState, runs: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """Runs as KFP's resources (without their tasks), as a reader sees them."""
    versions = _Versions(state)
    return [run_json(presented_run(r), ir=versions.ir(r), resumed_up_to=MAX_STARTS) for r in runs]


# -- runs -------------------------------------------------------------------------------------


def _filed(state: ServerState, call: Call, sub: Submission, what: str) -> str:
    """The namespace a new run or recurring run goes to (its experiment's, else the one named
    or the principal's only one), which the principal must be able to change."""
    if sub.experiment_id:
        found = experiment(state, sub.experiment_id, call, write=True)
        if sub.namespace and sub.namespace != found.namespace:
            raise InvalidArgumentError(
                f"experiment {found.experiment_id} belongs to namespace {found.namespace!r} "
                f"instead of {sub.namespace!r}"
            )
        return found.namespace
    namespace = call.who.default_namespace(sub.namespace, what)
    call.allow(namespace, f"{what.lower()}s of namespace {namespace!r}", write=True)
    return namespace


def allowed_run(state: ServerState, call: Call, *, write: bool = False) -> RunRecord:
    """The run the path names, allowed to the principal (to change, with `write`)."""
    run = state.runs.run(call.params["run_id"])
    call.allow(run.namespace, f"run {run.run_id}", write=write)
    return run


@route("POST", "/runs")
def create_run(state: ServerState, call: Call) -> Any:
    sub = submission(body_object(call.body))
    namespace = _filed(state, call, sub, "A run")
    run = state.runs.submit(
        NewRun(
            display_name=sub.display_name,
            ir=sub.ir,
            version=_version_of(state, sub, call),
            arguments=sub.parameters,
            pipeline_root=sub.pipeline_root,
            experiment_id=sub.experiment_id,
            namespace=namespace,
            description=sub.description,
            created_by=call.who.created_by,
        )
    )
    return runs_json(state, [run])[0]


@route("GET", "/runs/{run_id}")
def get_run(state: ServerState, call: Call) -> Any:
    from headwater.api.runs import get_run as run_details

    run = allowed_run(state, call)
    details = run_details(run.run_id, metadata=state.store)
    ir = _Versions(state).ir(run)
    return run_json(run, ir=ir, resumed_up_to=MAX_STARTS, details=details)


@route("POST", "/runs/{run_id}:terminate")
def terminate_run(state: ServerState, call: Call) -> Any:
    state.runs.terminate(allowed_run(state, call, write=True).run_id)


@route("POST", "/runs/{run_id}:retry")
def retry_run(state: ServerState, call: Call) -> Any:
    state.runs.retry(allowed_run(state, call, write=True).run_id)


@route("POST", "/runs/{run_id}:archive")
def archive_run(state: ServerState, call: Call) -> Any:
    state.runs.archive(allowed_run(state, call, write=True).run_id, archived=True)


@route("POST", "/runs/{run_id}:unarchive")
def unarchive_run(state: ServerState, call: Call) -> Any:
    state.runs.archive(allowed_run(state, call, write=True).run_id, archived=False)


@route("DELETE", "/runs/{run_id}")
def delete_run(state: ServerState, call: Call) -> Any:
    state.runs.delete(allowed_run(state, call, write=True).run_id)


@route("GET", "/runs/{run_id}/nodes/{node_id}/artifacts/{artifact_name}:read")
def read_artifact(state: ServerState, call: Call) -> Any:
    """A task's artifact (an output, else an input, of that name), tarred and gzipped, base64
    in `data`, as KFP answers it. `node_id` is a `task_id` from `task_details`, or the task's
    name."""
    from headwater.api.exports import export_artifact
    from headwater.api.runs import get_run as run_details

    run_id, node, name = (call.params[k] for k in ("run_id", "node_id", "artifact_name"))
    details = run_details(allowed_run(state, call).run_id, metadata=state.store)
    task = next(
        (t for t in details.tasks if node in (str(t.execution_id), t.name)),
        None,
    )
    if task is None:
        names = ", ".join(f"{t.name} ({t.execution_id})" for t in details.tasks) or "none"
        raise NotFoundError(f"run {run_id} has no task {node!r} (tasks: {names})")
    ids = task.output_artifact_ids.get(name) or task.input_artifact_ids.get(name)
    if not ids:
        slots = sorted({*task.output_artifact_ids, *task.input_artifact_ids}) or ["none"]
        raise NotFoundError(
            f"task {task.name} has no artifact {name!r} (artifacts: {', '.join(slots)})"
        )
    export = export_artifact(ids[0], metadata=state.store, tar=True)
    return {"data": base64.b64encode(export.data).decode("ascii")}


# -- recurring runs -----------------------------------------------------------------------------


def recurring(state: ServerState, call: Call, *, write: bool = False) -> RecurringRunRecord:
    """The recurring run the path names, or NotFoundError; allowed to the principal (to
    change, with `write`), or PermissionDeniedError."""
    recurring_run_id = call.params["recurring_run_id"]
    found = state.store.get_recurring_run(recurring_run_id)
    if found is None:
        raise NotFoundError(f"no recurring run with id {recurring_run_id!r}")
    call.allow(found.namespace, f"recurring run {recurring_run_id}", write=write)
    return found


def recurring_runs_json(state: ServerState, rows: list[RecurringRunRecord]) -> list[Any]:
    """Recurring runs as KFP's resources."""
    versions = _Versions(state)
    return [recurring_json(r, versions.get(r.pipeline_version_id)) for r in rows]


@route("POST", "/recurringruns")
def create_recurring_run(state: ServerState, call: Call) -> Any:
    from headwater.metadata.encoding import ir_digest
    from headwater.server.schedule import parse_trigger

    doc = body_object(call.body)
    trigger, stored = parse_trigger(doc.get("trigger"))
    raw = doc.get("max_concurrency")
    raw = 1 if raw is None or raw == "" else raw
    try:
        concurrency = int(raw)  # int64: a number or a string
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"max_concurrency {raw!r}: a number from 1 to 10") from exc
    if not 1 <= concurrency <= 10:
        raise InvalidArgumentError(f"max_concurrency must be from 1 to 10, got {concurrency}")
    mode = doc.get("mode") or "ENABLE"
    if mode not in ("ENABLE", "DISABLE"):
        raise InvalidArgumentError(f"mode {mode!r}: ENABLE or DISABLE")
    no_catchup = doc.get("no_catchup") or False
    if not isinstance(no_catchup, bool):
        raise InvalidArgumentError(f"no_catchup must be true or false, got {no_catchup!r}")
    sub = submission(doc)
    namespace = _filed(state, call, sub, "A recurring run")
    found = _version_of(state, sub, call)
    # Its runs are checked as they will be made, before anything is stored.
    checked = state.runs.check(
        NewRun(
            display_name=sub.display_name,
            ir=sub.ir,
            version=found,
            arguments=sub.parameters,
            pipeline_root=sub.pipeline_root,
            experiment_id=sub.experiment_id,
            namespace=namespace,
        )
    )
    now = time.time()
    if found is None:  # an inline spec: the version no one uploaded of its IR
        raw_ir = dict(checked.ir.raw)
        found = state.store.create_version(
            VersionRecord(
                pipeline_version_id=str(uuid.uuid4()),
                pipeline_id=None,
                name=checked.ir.name,
                digest=ir_digest(raw_ir),
                ir=raw_ir,
                created_at=now,
                created_by=call.who.created_by,
            )
        )
    row = RecurringRunRecord(
        recurring_run_id=str(uuid.uuid4()),
        display_name=sub.display_name,
        pipeline_version_id=found.pipeline_version_id,
        trigger=stored,
        runtime_config={"parameters": sub.parameters, "pipeline_root": sub.pipeline_root},
        description=sub.description,
        experiment_id=checked.experiment.experiment_id,
        namespace=checked.experiment.namespace,
        max_concurrency=concurrency,
        no_catchup=no_catchup,
        status="ENABLED" if mode == "ENABLE" else "DISABLED",
        next_fire_at=trigger.next_after(now),
        created_at=now,
        updated_at=now,
        created_by=call.who.created_by,
    )
    state.store.create_recurring_run(row)
    state.queue.wake()
    return recurring_runs_json(state, [row])[0]


@route("GET", "/recurringruns/{recurring_run_id}")
def get_recurring_run(state: ServerState, call: Call) -> Any:
    return recurring_runs_json(state, [recurring(state, call)])[0]


@route("POST", "/recurringruns/{recurring_run_id}:enable")
def enable_recurring_run(state: ServerState, call: Call) -> Any:
    state.runs.enable_recurring_run(recurring(state, call, write=True).recurring_run_id, True)


@route("POST", "/recurringruns/{recurring_run_id}:disable")
def disable_recurring_run(state: ServerState, call: Call) -> Any:
    state.runs.enable_recurring_run(recurring(state, call, write=True).recurring_run_id, False)


@route("DELETE", "/recurringruns/{recurring_run_id}")
def delete_recurring_run(state: ServerState, call: Call) -> Any:
    state.store.delete_recurring_run(recurring(state, call, write=True).recurring_run_id)


for _listing in (
    Listing(
        path="/runs",
        kind="runs",
        key="runs",
        spec=ListSpec(
            id_key="run_id",
            sort_keys=("created_at", "display_name", "finished_at", "scheduled_at"),
            filter_keys=(
                "display_name",
                "created_at",
                "finished_at",
                "storage_state",
                "state",
                "experiment_id",
                "namespace",
                "description",
                "recurring_run_id",
            ),
        ),
        scope=scoped("experiment_id", "namespace"),
        convert=runs_json,
    ),
    Listing(
        path="/recurringruns",
        kind="recurring_runs",
        # The one key upstream does not write in snake_case (its proto field is so named).
        key="recurringRuns",
        spec=ListSpec(
            id_key="recurring_run_id",
            sort_keys=("created_at", "display_name", "updated_at"),
            filter_keys=("display_name", "created_at", "status", "experiment_id", "namespace"),
        ),
        scope=scoped("experiment_id", "namespace"),
        convert=recurring_runs_json,
    ),
):
    register_list(_listing)
