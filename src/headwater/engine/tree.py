"""The run as a tree: DAG instances (`DagRun`) holding tasks (`TaskRun`) holding DAG instances.

The root DAG is the pipeline; a nested pipeline, a condition, an exit handler and each loop
iteration is a `DagRun` under the `TaskRun` that started it. These are plain records: the state
machine (`engine/state.py`) is what moves them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.spec.ir import ComponentSpec, TaskSpec
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, Outputs, TaskError, TaskState

if TYPE_CHECKING:
    from headwater.executors.containers import ContainerPolicy
    from headwater.sandbox.policy import SandboxPolicy

#: Final-status strings as KFP's backend reports them to exit handlers (MLMD states).
FINAL_STATUS = {
    TaskState.SUCCEEDED: "COMPLETE",
    TaskState.FAILED: "FAILED",
    TaskState.CANCELED: "CANCELED",
    TaskState.SKIPPED: "SKIPPED",
}


@dataclass(frozen=True)
class RunContext:
    """Run-wide facts that tasks see through placeholders, artifact URIs and their launch."""

    run_id: str
    job_name: str
    pipeline_root: str
    run_dir: Path
    create_time_utc: str
    env: Mapping[str, str] = field(default_factory=dict)
    #: Builds `<root>/<part>/...` URIs, refusing parts that would leave the root.
    artifact_uri: Callable[..., str] | None = None
    #: Directories of installed `packages_to_install`, put on every task's import path.
    python_path: tuple[str, ...] = ()
    #: The most bytes a task's log keeps (`HEADWATER_TASK_LOG_LIMIT`); None for no cap.
    log_limit: int | None = None
    #: Which tasks run in their container images, and how (None: all on the host).
    containers: ContainerPolicy | None = None
    #: How tasks on the host are sandboxed (None: they are not).
    sandbox: SandboxPolicy | None = None
    #: Where the run's secrets, config maps and volumes are (`$HEADWATER_HOME`, or its
    #: namespace's folder on a multi-user server); None: `$HEADWATER_HOME`.
    platform_home: Path | None = None
    #: The most tasks the run may make (`HEADWATER_MAX_TASKS`): a loop past it fails.
    max_tasks: int = 1_000_000

    def placeholders(
        self, task: TaskRun, executor_input: dict[str, Any] | None = None
    ) -> PlaceholderContext:
        """What `{{$...}}` placeholders resolve to for `task`."""
        return PlaceholderContext(
            executor_input=executor_input or {"inputs": {"parameterValues": task.parameters}},
            job_name=self.job_name,
            job_resource_name=self.job_name,
            job_uuid=self.run_id,
            task_name=task.spec.name,
            task_uuid=f"{self.run_id}-{task.id}",
            pipeline_root=self.pipeline_root,
            create_time_utc=self.create_time_utc,
            schedule_time_utc=self.create_time_utc,
            workspace_path=str(self.run_dir / "workspace"),
        )


@dataclass(eq=False)
class DagRun:
    """One instance of a DAG component: the root, a nested pipeline, a loop iteration..."""

    component: ComponentSpec
    parameters: dict[str, Any]
    artifacts: dict[str, list[dict[str, Any]]]
    parent: TaskRun | None
    prefix: str = ""
    suffix: str = ""
    tasks: dict[str, TaskRun] = field(default_factory=dict)
    active: bool = True
    #: A task of this DAG (or of one inside it) failed: what has not started is canceled.
    failing: bool = False
    #: Started by a task that runs whatever happened upstream (an exit handler,
    #: `ignore_upstream_failure`): failures above it do not cancel its tasks.
    shielded: bool = False
    state: TaskState = TaskState.RUNNING
    outputs: Outputs = field(default_factory=Outputs)
    #: How many of `tasks` are not final yet: the DAG closes when none is.
    open_tasks: int = 0

    def ancestors(self) -> Iterator[DagRun]:
        """This DAG and every DAG above it."""
        dag: DagRun | None = self
        while dag is not None:
            yield dag
            dag = dag.parent.dag if dag.parent is not None else None


@dataclass(eq=False)
class TaskRun:
    """One task of one DagRun, with what it resolved and what it produced."""

    id: int
    spec: TaskSpec
    dag: DagRun
    name: str
    component: ComponentSpec
    state: TaskState = TaskState.PENDING
    cached: bool = False
    cached_from: int | None = None
    resumed: bool = False
    artifact_ids: dict[str, int] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    outputs: Outputs = field(default_factory=Outputs)
    children: list[DagRun] = field(default_factory=list)
    #: A loop's iterations: the next one to activate, and how many are active and open.
    next_child: int = 0
    open_children: int = 0
    attempts: int = 0
    not_before: float = 0.0
    error: TaskError | None = None
    launch: Launch | None = None
    #: The cache key of the latest attempt ('' until the engine computed one).
    fingerprint: str = ""
    #: Why its outcome is a failure though it succeeded ('' when not): never reused.
    failed_outcome: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    #: Which executor ran the latest attempt, and which of its workers ('' until known).
    executor: str = ""
    worker: str = ""
    #: The container its latest attempt ran in (`TaskResult.container`); None on the host.
    container: dict[str, str] | None = None
    #: The sandbox its latest attempt ran in (`TaskResult.sandbox`); None when none.
    sandbox: dict[str, Any] | None = None
    #: Where the latest attempt's log went when not at its launch's `log_path` (a URI).
    log_uri: str = ""

    @property
    def is_executor(self) -> bool:
        """True for tasks that run a container/Python executor or an importer."""
        return self.component.executor_label is not None

    @property
    def failing(self) -> bool:
        """True when a failure in this task's scope cancels what it has not started.

        The scope ends at a shielded DAG: an exit handler's tasks run after the guarded ones
        failed, even when the handler is itself a nested pipeline.
        """
        dag: DagRun | None = self.dag
        while dag is not None:
            if dag.failing:
                return True
            if dag.shielded:
                return False
            dag = dag.parent.dag if dag.parent is not None else None
        return False

    def first_error(self) -> TaskError | None:
        """This task's error, or the first error of a failed task inside it."""
        if self.error is not None:
            return self.error
        for child in self.children:
            for sub in child.tasks.values():
                if sub.state is TaskState.FAILED:
                    found = sub.first_error()
                    if found is not None:
                        return found
        return None


def combined(states: set[TaskState]) -> TaskState:
    """The state of a DAG from its tasks' final states."""
    if TaskState.FAILED in states:
        return TaskState.FAILED
    if TaskState.CANCELED in states:
        return TaskState.CANCELED
    return TaskState.SUCCEEDED
