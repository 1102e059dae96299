"""Every change `headwater server` makes to a run, written once: submit, terminate, retry, archive
and delete. KFP's routes, the web UI and the recurring-run scheduler all call these, so a run
started or deleted from any of them is the same operation with the same answers.

A run is a Headwater run from the moment it is accepted: `submit` checks everything a run
needs before anything is stored (the pipeline, its arguments bound and coerced once, the
pipeline root, the experiment), then records the run QUEUED; the queue (`server.queue`)
starts it. Errors are Headwater's own (`NotFoundError`, `ConflictError`, other `UserError`s);
the routes turn them into HTTP answers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.errors import ConflictError, InvalidArgumentError, NotFoundError, UserError
from headwater.metadata.base import (
    ACTIVE_RUN_STATES,
    ExperimentRecord,
    MetadataStore,
    RunRecord,
    VersionRecord,
)
from headwater.processes import process_alive

if TYPE_CHECKING:
    from headwater.api.runs import DeletedRun
    from headwater.spec.ir import PipelineIR

__all__ = ["Checked", "NewRun", "RunOperations"]

#: The experiment a run without one goes to, per namespace (as KFP's "Default").
DEFAULT_EXPERIMENT = "Default"


@dataclass
class NewRun:
    """A run to submit: its pipeline (a version record, or an IR no one uploaded), arguments
    and where it is filed."""

    display_name: str
    ir: PipelineIR | None = None
    version: VersionRecord | None = None
    arguments: Mapping[str, Any] | None = None
    pipeline_root: str = ""
    experiment_id: str = ""
    namespace: str = ""
    description: str = ""
    recurring_run_id: str | None = None
    #: When its recurring run was due (its `scheduled_at` until a worker takes it).
    scheduled_at: float | None = None
    #: Who submitted it (a principal's name; None when no one was identified).
    created_by: str | None = None


@dataclass(frozen=True)
class Checked:
    """A run ready to store: its pipeline, bound arguments, pipeline root and experiment."""

    ir: PipelineIR
    parameters: dict[str, Any]
    pipeline_root: str
    experiment: ExperimentRecord


class RunOperations:
    """The run operations of one server, over its metadata store.

    Args:
        store: The metadata store (runs, experiments, versions).
        wake: Called after a change the queue should act on at once.
        multi_user: Whether the server is multi-user now (a run's artifacts then go under
            its namespace's own root, `namespace_root`).
    """

    def __init__(
        self,
        store: MetadataStore,
        *,
        wake: Callable[[], None] = lambda: None,
        multi_user: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.wake = wake
        self.multi_user = multi_user

    # -- submit ------------------------------------------------------------------------------

    def check(self, new: NewRun) -> Checked:
        """Everything a run of `new` needs, checked, before anything is stored: its pipeline,
        its arguments bound to it, its pipeline root and its experiment.

        Raises:
            NotFoundError: Its experiment does not exist.
            UserError: An argument that does not fit the pipeline, a pipeline root that
                cannot be used, an archived experiment.
        """
        from headwater.spec.documents import check_document
        from headwater.spec.ir import parse_pipeline

        check_document(
            {"name": new.display_name, "description": new.description, "arguments": new.arguments},
            what="the run",
        )
        ir = new.ir
        if ir is None:
            if new.version is None:
                raise InvalidArgumentError("a run needs a pipeline: an IR or a version")
            ir = parse_pipeline(new.version.ir)
        parameters = _bound(ir, dict(new.arguments or {}))
        experiment = self.experiment_for(new.experiment_id, new.namespace, new.created_by)
        if experiment.namespace and self.multi_user():
            root = self.namespace_root(experiment.namespace, new.pipeline_root)
        else:
            root = _pipeline_root(new.pipeline_root)
        if experiment.storage_state == "ARCHIVED":
            raise InvalidArgumentError(
                f"experiment {experiment.display_name!r} ({experiment.experiment_id}) is "
                "archived: unarchive it, or run in another experiment"
            )
        return Checked(ir, parameters, root, experiment)

    def namespace_root(self, namespace: str, given: str = "") -> str:
        """Where a run of `namespace` on a multi-user server writes its artifacts: the root
        an admin gave the namespace, else the namespace's folder of the server's root. A
        root the run asks for must lie inside it (a run must not write another namespace's
        artifacts, nor its sandbox show them).

        Raises:
            InvalidArgumentError: `given` lies outside the namespace's root.
        """
        from headwater import config

        settings = self.store.get_namespace(namespace)
        own = settings.pipeline_root if settings is not None else ""
        root = _pipeline_root(own or config.pipeline_root().rstrip("/") + "/" + namespace)
        if not given:
            return root
        asked = _pipeline_root(given)
        if not _inside_root(asked, root):
            raise InvalidArgumentError(
                f"runtime_config.pipeline_root {given!r} is outside namespace {namespace!r}'s "
                f"artifacts ({root}): leave it empty, or give a folder inside it"
            )
        return asked

    def submit(self, new: NewRun) -> RunRecord:
        """Check (`check`) and queue a run; the run as recorded (QUEUED).

        Raises:
            NotFoundError: Its experiment does not exist.
            UserError: As `check` (nothing is stored).
        """
        checked = self.check(new)
        run = RunRecord(
            run_id=str(uuid.uuid4()),
            pipeline=checked.ir.name,
            pipeline_version="",
            state="QUEUED",
            parameters=checked.parameters,
            pipeline_root=checked.pipeline_root,
            created_at=time.time(),
            pipeline_version_id=new.version.pipeline_version_id if new.version else "",
            display_name=new.display_name,
            description=new.description,
            experiment_id=checked.experiment.experiment_id,
            namespace=checked.experiment.namespace,
            recurring_run_id=new.recurring_run_id,
            scheduled_at=new.scheduled_at,
            created_by=new.created_by,
        )
        self.store.create_run(run, ir=dict(checked.ir.raw))
        self.wake()
        return self.run(run.run_id)

    def experiment_for(
        self, experiment_id: str, namespace: str, created_by: str | None = None
    ) -> ExperimentRecord:
        """The experiment `experiment_id`, or without one the namespace's "Default" (made on
        first use, also by two requests at once).

        Raises:
            NotFoundError: No experiment has that id.
        """
        if experiment_id:
            found = self.store.get_experiment(experiment_id)
            if found is None:
                raise NotFoundError(f"no experiment with id {experiment_id!r}")
            return found
        for _ in range(3):
            found = self.store.experiment_named(DEFAULT_EXPERIMENT, namespace)
            if found is not None:
                return found
            with contextlib.suppress(ConflictError):  # made meanwhile by another request
                return self.store.create_experiment(
                    ExperimentRecord(
                        str(uuid.uuid4()),
                        DEFAULT_EXPERIMENT,
                        "",
                        namespace,
                        "AVAILABLE",
                        time.time(),
                        created_by,
                    )
                )
        raise ConflictError(f"the {DEFAULT_EXPERIMENT} experiment could not be made; retry")

    #: The UI's `RunControl`: runs wait in this queue, and terminate and retry.
    queued = True

    def start(
        self,
        *,
        ir: PipelineIR | None = None,
        version_id: str = "",
        arguments: Mapping[str, Any],
        display_name: str = "",
        experiment_id: str = "",
        namespace: str = "",
        created_by: str | None = None,
    ) -> str:
        """Queue a run for the web UI (its `RunControl`); the new run's id. A run given no
        name is named after its pipeline and the time.

        Raises:
            NotFoundError: The version or experiment does not exist.
            UserError: As `check`.
        """
        version = None
        if version_id:
            version = self.store.get_version(version_id)
            if version is None:
                raise NotFoundError(f"no pipeline version with id {version_id!r}")
        name = ir.name if ir is not None else version.name if version else "run"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        new = NewRun(
            display_name=display_name.strip() or f"{name} {stamp}",
            ir=ir,
            version=version,
            arguments=arguments,
            experiment_id=experiment_id,
            namespace=namespace,
            created_by=created_by,
        )
        return self.submit(new).run_id

    # -- change ------------------------------------------------------------------------------

    def run(self, run_id: str) -> RunRecord:
        """The run, as a reader sees it.

        Raises:
            NotFoundError: No run has this id.
        """
        from headwater.metadata.reconcile import presented_run

        found = self.store.get_run(run_id)
        if found is None or found.run_id != run_id:
            raise NotFoundError(f"no run with id {run_id!r}")
        return presented_run(found)

    def terminate(self, run_id: str) -> None:
        """Stop a run: a queued (or interrupted) one is CANCELED at once; a running one is
        CANCELING while its engine (SIGTERM) stops its tasks, then CANCELED, unless it
        succeeded meanwhile.

        Raises:
            NotFoundError: No run has this id.
            ConflictError: It has ended.
        """
        run = self.run(run_id)
        now = time.time()
        if self.store.transition_run(
            run_id, source=("QUEUED", "INTERRUPTED"), to="CANCELED", finished_at=now
        ):
            self.wake()
            return
        if self.store.transition_run(run_id, source=("RUNNING",), to="CANCELING"):
            run = self.run(run_id)
        if run.state not in ACTIVE_RUN_STATES:
            raise ConflictError(f"run {run_id} has ended ({run.state}): nothing to stop")
        _signal(run)
        self.wake()

    def retry(self, run_id: str) -> None:
        """Queue a failed, canceled or interrupted run again: a worker resumes it, reusing
        every task that succeeded.

        Raises:
            NotFoundError: No run has this id.
            ConflictError: It is in another state.
        """
        run = self.run(run_id)
        if not self.store.transition_run(
            run_id,
            source=("FAILED", "CANCELED", "INTERRUPTED"),
            to="QUEUED",
            finished_at=None,
            error=None,
            starts=0,
        ):
            raise ConflictError(
                f"run {run_id} is {run.state}: only a FAILED, CANCELED or INTERRUPTED run retries"
            )
        self.wake()

    def archive(self, run_id: str, archived: bool) -> None:
        """Archive (hide from KFP's default lists) or unarchive a run.

        Raises:
            NotFoundError: No run has this id.
        """
        self.store.update_run(run_id, storage_state="ARCHIVED" if archived else "AVAILABLE")

    def enable_recurring_run(self, recurring_run_id: str, enabled: bool) -> None:
        """Enable a recurring run (it next fires at its trigger's next time from now) or
        disable it.

        Raises:
            NotFoundError: No recurring run has this id.
        """
        from headwater.server.schedule import trigger_of

        found = self.store.get_recurring_run(recurring_run_id)
        if found is None:
            raise NotFoundError(f"no recurring run with id {recurring_run_id!r}")
        if not enabled:
            self.store.update_recurring_run(recurring_run_id, status="DISABLED")
            return
        following = trigger_of(found.trigger).next_after(time.time())
        self.store.update_recurring_run(recurring_run_id, status="ENABLED", next_fire_at=following)
        self.wake()

    def delete(self, run_id: str) -> DeletedRun:
        """Delete a run, its tasks, logs and the artifacts no other run uses (only the files
        under its own pipeline root); what was removed.

        Raises:
            NotFoundError: No run has this id.
            ConflictError: It is queued or running (terminate it first).
        """
        from headwater.api.runs import delete_run

        self.run(run_id)
        return delete_run(run_id, metadata=self.store)


def _bound(ir: PipelineIR, arguments: dict[str, Any]) -> dict[str, Any]:
    """The run's arguments: its parameters bound to the pipeline's inputs (defaults applied,
    types coerced) and its input artifacts as given."""
    from headwater.engine.runner import bind_arguments

    artifacts = set(ir.root.interface.input_artifacts)
    try:
        bound = bind_arguments(ir, {k: v for k, v in arguments.items() if k not in artifacts})
    except UserError as exc:
        raise InvalidArgumentError(f"runtime_config.parameters: {exc}") from exc
    return {**bound, **{k: v for k, v in arguments.items() if k in artifacts}}


def _inside_root(uri: str, root: str) -> bool:
    return uri.rstrip("/") == root.rstrip("/") or uri.startswith(root.rstrip("/") + "/")


def _pipeline_root(given: str) -> str:
    """The run's artifact root, made absolute now: the one given, else the server's."""
    from headwater import config
    from headwater.artifacts import store_for

    try:
        return store_for(given or config.pipeline_root()).root
    except UserError as exc:
        raise InvalidArgumentError(f"runtime_config.pipeline_root: {exc}") from exc


def _signal(run: RunRecord) -> None:
    """SIGTERM to the run's engine, if it runs on this host and is still that process."""
    if run.engine_host != socket.gethostname() or run.engine_pid <= 0:
        return
    if process_alive(run.engine_pid, run.engine_started):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(run.engine_pid, signal.SIGTERM)
