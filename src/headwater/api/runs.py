"""Runs in the metadata store: list them (paged), show one with its tasks, delete one.

Reading opens the store read-only. A run still recorded RUNNING whose engine on this host is
gone is returned INTERRUPTED (and its RUNNING tasks FAILED), exactly as the next `run` or
`resume` will record it; reading itself writes nothing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

from headwater.api import iso_time
from headwater.api._args import choice, count
from headwater.api._store import MetadataArg, reading, writing
from headwater.errors import ConflictError, NotFoundError
from headwater.metadata.base import (
    ACTIVE_RUN_STATES,
    RUN_STATES,
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    MetadataStore,
    RunRecord,
)
from headwater.metadata.reconcile import presented_execution, presented_run

__all__ = [
    "DeletedRun",
    "RunDetails",
    "RunInfo",
    "TaskDetails",
    "delete_run",
    "get_run",
    "list_runs",
]


@dataclass(frozen=True)
class RunInfo:
    """One run as recorded (times are Unix seconds; `to_json` gives ISO 8601 strings)."""

    run_id: str
    pipeline: str
    pipeline_version: str
    state: str
    created_at: float
    finished_at: float | None
    parameters: dict[str, Any]
    outputs: dict[str, Any]
    error: dict[str, Any] | None
    pipeline_root: str
    metrics: dict[str, float]
    #: Its name (KFP's `display_name`), "" when it was given none (`headwater run`).
    display_name: str = ""
    description: str = ""
    experiment_id: str | None = None
    #: The experiment's name, "" outside any.
    experiment: str = ""
    namespace: str = ""
    #: AVAILABLE, or ARCHIVED (hidden from KFP's default lists).
    storage_state: str = "AVAILABLE"
    #: The recurring run that made it, if one did.
    recurring_run_id: str | None = None
    #: The version record it ran, and the named pipeline that version was uploaded to.
    pipeline_version_id: str = ""
    pipeline_id: str | None = None
    #: When a worker first took it from the queue (None: never queued, or still queued).
    scheduled_at: float | None = None
    #: Who submitted it to a team server (a token's or user's name; None: no one identified).
    created_by: str | None = None

    @classmethod
    def of(cls, run: RunRecord) -> RunInfo:
        """The view of a stored run record."""
        return cls(
            run_id=run.run_id,
            pipeline=run.pipeline,
            pipeline_version=run.pipeline_version,
            state=run.state,
            created_at=run.created_at,
            finished_at=run.finished_at,
            parameters=run.parameters,
            outputs=run.outputs,
            error=run.error,
            pipeline_root=run.pipeline_root,
            metrics=run.metrics,
            display_name=run.display_name,
            description=run.description,
            experiment_id=run.experiment_id,
            experiment=run.experiment,
            namespace=run.namespace,
            storage_state=run.storage_state,
            recurring_run_id=run.recurring_run_id,
            pipeline_version_id=run.pipeline_version_id,
            pipeline_id=run.pipeline_id,
            scheduled_at=run.scheduled_at,
            created_by=run.created_by,
        )

    @property
    def duration(self) -> float | None:
        """Seconds from start (a worker taking it, for a queued run) to finish; None while
        running or if it never finished."""
        if self.finished_at is None:
            return None
        return self.finished_at - (self.scheduled_at or self.created_at)

    def to_json(self) -> dict[str, Any]:
        """The run's JSON shape (`runs list --json` entries; `runs show --json` adds tasks)."""
        return {
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "pipeline_version": self.pipeline_version,
            "state": self.state,
            "created_at": iso_time(self.created_at),
            "finished_at": iso_time(self.finished_at),
            "metrics": self.metrics,
            "parameters": self.parameters,
            "outputs": self.outputs,
            "error": self.error,
            "pipeline_root": self.pipeline_root,
            "display_name": self.display_name,
            "description": self.description,
            "experiment_id": self.experiment_id,
            "experiment": self.experiment,
            "namespace": self.namespace,
            "storage_state": self.storage_state,
            "recurring_run_id": self.recurring_run_id,
            "pipeline_version_id": self.pipeline_version_id,
            "pipeline_id": self.pipeline_id,
            "scheduled_at": iso_time(self.scheduled_at),
            "created_by": self.created_by,
        }


@dataclass(frozen=True)
class TaskDetails:
    """One executor task of a run, with the URIs of the artifacts it read and wrote."""

    name: str
    state: str
    execution_id: int | None
    cached_from: int | None
    started_at: float | None
    finished_at: float | None
    attempts: int
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    input_artifacts: dict[str, list[str]]
    output_artifacts: dict[str, list[str]]
    log_path: str
    error: dict[str, Any] | None
    executor: str | None = None
    worker: str | None = None
    #: The container it ran in (`{"runtime", "image", "digest"}`); None on the host.
    container: dict[str, Any] | None = None
    #: The sandbox it ran in and what it enforced (`headwater.sandbox`); None: none.
    sandbox: dict[str, Any] | None = None
    #: The same artifacts by id (`headwater artifacts show ID`, KFP's `artifact_ids`).
    input_artifact_ids: dict[str, list[int]] = field(default_factory=dict)
    output_artifact_ids: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, e: ExecutionRecord, events: list[tuple[EventRecord, ArtifactRecord]]
    ) -> TaskDetails:
        """The view of a stored execution and its events."""
        arts: dict[str, dict[str, list[str]]] = {"INPUT": {}, "OUTPUT": {}}
        ids: dict[str, dict[str, list[int]]] = {"INPUT": {}, "OUTPUT": {}}
        for event, art in events:
            arts[event.kind].setdefault(event.slot, []).append(art.uri)
            ids[event.kind].setdefault(event.slot, []).append(event.artifact_id)
        return cls(
            name=e.task,
            state=e.state,
            execution_id=e.id,
            cached_from=e.cached_from,
            started_at=e.started_at,
            finished_at=e.finished_at,
            attempts=e.attempts,
            inputs=e.inputs,
            outputs=e.outputs,
            input_artifacts=arts["INPUT"],
            output_artifacts=arts["OUTPUT"],
            log_path=e.log_path,
            error=e.error,
            executor=e.executor,
            worker=e.worker,
            container=e.container,
            sandbox=e.sandbox,
            input_artifact_ids=ids["INPUT"],
            output_artifact_ids=ids["OUTPUT"],
        )

    @property
    def cached(self) -> bool:
        """True if the task reused an earlier result instead of running."""
        return self.state == "CACHED"

    @property
    def duration(self) -> float | None:
        """Seconds the task ran; None unless it started and finished."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    def to_json(self) -> dict[str, Any]:
        """The task's JSON shape (the `tasks` of `runs show --json`)."""
        took = self.duration
        return {
            "name": self.name,
            "state": self.state,
            "cached": self.cached,
            "cached_from": self.cached_from,
            "execution_id": self.execution_id,
            "started_at": iso_time(self.started_at),
            "finished_at": iso_time(self.finished_at),
            "duration": "" if took is None else f"{took:.2f}s",
            "inputs": self.inputs,
            "outputs": self.outputs,
            "artifacts": {"inputs": self.input_artifacts, "outputs": self.output_artifacts},
            "artifact_ids": {
                "inputs": self.input_artifact_ids,
                "outputs": self.output_artifact_ids,
            },
            "log_path": self.log_path,
            "error": self.error,
            "attempts": self.attempts,
            "executor": self.executor,
            "worker": self.worker,
            "container": self.container,
            "sandbox": self.sandbox,
        }


@dataclass(frozen=True)
class RunDetails(RunInfo):
    """A run with its tasks, in start order."""

    tasks: list[TaskDetails] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The run's JSON shape plus `tasks` (`runs show --json`)."""
        return {**super().to_json(), "tasks": [t.to_json() for t in self.tasks]}


@dataclass(frozen=True)
class DeletedRun:
    """What `delete_run` removed."""

    run_id: str
    artifact_uris: list[str]

    def to_json(self) -> dict[str, Any]:
        """`{"run_id": ..., "artifact_uris": [...]}`."""
        return {"run_id": self.run_id, "artifact_uris": self.artifact_uris}


def list_runs(
    *,
    pipeline: str | None = None,
    state: str | None = None,
    limit: int | None = 50,
    offset: int = 0,
    text: str | None = None,
    experiment_id: str | None = None,
    recurring_run_id: str | None = None,
    namespaces: list[str] | None = None,
    metadata: MetadataArg = None,
) -> list[RunInfo]:
    """Runs, newest first, with their metrics. Reads only.

    Args:
        pipeline: Only runs of the pipeline with this name.
        state: Only runs in this state (one of `RUN_STATES`, any case).
        limit: At most this many (None: all).
        offset: Skip this many of the newest first (for paging: `offset=50, limit=50`).
        text: Only runs whose id starts with it, or whose pipeline name, name or state
            contains it, ignoring case (filtered in the store's query). The state matched is
            the one stored: a dead engine's run shown INTERRUPTED is stored, and matched, as
            RUNNING.
        experiment_id: Only runs of this experiment.
        recurring_run_id: Only runs this recurring run made.
        namespaces: Only runs in these namespaces (what a server's principal may list).
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Returns:
        The runs; none if the default store was never created.

    Raises:
        InvalidArgumentError: `state` is unknown, `limit` is below 1 or `offset` below 0.
        StorageError: The store cannot be opened for reading.
    """
    wanted = None if state is None else choice("run state", state, RUN_STATES)
    if limit is not None:
        count("limit", limit, minimum=1)
    count("offset", offset, minimum=0)
    text = (text or "").strip() or None
    scope: dict[str, Any] = {
        "experiment_id": experiment_id,
        "recurring_run_id": recurring_run_id,
        "text": text,
        "namespaces": namespaces,
    }
    with reading(metadata) as store:
        if store is None:
            return []
        if wanted not in (*ACTIVE_RUN_STATES, "INTERRUPTED", "CANCELED"):
            records = store.list_runs(
                pipeline=pipeline, state=wanted, limit=limit, offset=offset, **scope
            )
            return [RunInfo.of(presented_run(r)) for r in records]
        # A dead engine's run is stored RUNNING (or CANCELING) but shown INTERRUPTED (or
        # CANCELED), so these states are filtered after presenting. Active runs are few;
        # ended ones are read only as far as the page needs.
        stored = [
            presented_run(r)
            for active in ACTIVE_RUN_STATES
            for r in store.list_runs(pipeline=pipeline, state=active, **scope)
        ]
        shown = [r for r in stored if r.state == wanted]
        if wanted in ("INTERRUPTED", "CANCELED"):
            end = None if limit is None else offset + limit
            shown += store.list_runs(pipeline=pipeline, state=wanted, limit=end, **scope)
            shown.sort(key=lambda r: (r.created_at, r.run_id), reverse=True)
        page = shown[offset:] if limit is None else shown[offset : offset + limit]
        return [RunInfo.of(r) for r in page]


def get_run(run_id: str, *, metadata: MetadataArg = None) -> RunDetails:
    """One run with its tasks, their inputs, outputs, artifacts and logs. Reads only.

    Args:
        run_id: The run's id, or a unique prefix of it.
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Raises:
        NotFoundError: No run has that id, or the prefix matches several.
        StorageError: The store cannot be opened for reading.
    """
    with reading(metadata) as store:
        if store is None:
            raise _no_run(run_id)
        record = _find_run(store, run_id)
        shown = presented_run(record)
        executions = [presented_execution(e, record) for e in store.list_executions(shown.run_id)]
        events = store.artifacts_of_many([e.id for e in executions if e.id is not None])
        tasks = [TaskDetails.of(e, events.get(e.id or 0, [])) for e in executions]
    info = RunInfo.of(shown)
    return RunDetails(**vars(info), tasks=tasks)


def delete_run(run_id: str, *, metadata: MetadataArg = None) -> DeletedRun:
    """Delete a run, its tasks and logs, and the artifacts no other run uses.

    Artifact files are deleted only under the run's own pipeline root; the run's folder
    under `$HEADWATER_HOME/runs` goes too.

    Args:
        run_id: The run's id, or a unique prefix of it.
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Raises:
        NotFoundError: No run has that id.
        ConflictError: The run is queued or running (terminate it first).
    """
    from headwater import config
    from headwater.artifacts import store_for

    with writing(metadata) as store:
        if store is None:
            raise _no_run(run_id)
        run = presented_run(_find_run(store, run_id))
        if run.state in ACTIVE_RUN_STATES:
            raise ConflictError(
                f"run {run.run_id} is {run.state} (engine pid {run.engine_pid} on "
                f"{run.engine_host}): terminate it, or wait for it to finish, first"
            )
        if run.state == "QUEUED":
            raise ConflictError(f"run {run.run_id} is QUEUED: terminate it first")
        uris = store.delete_run(run.run_id)
    artifacts = store_for(run.pipeline_root) if run.pipeline_root else None
    for uri in uris:
        if artifacts is not None and uri.startswith(artifacts.root):
            artifacts.delete(uri)
    shutil.rmtree(config.runs_dir() / run.run_id, ignore_errors=True)
    return DeletedRun(run.run_id, uris)


def _find_run(store: MetadataStore, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise _no_run(run_id)
    return run


def _no_run(run_id: str) -> NotFoundError:
    return NotFoundError(f"no run {run_id!r}: see `headwater runs list`")
