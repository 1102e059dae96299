"""The result of a run as the API and CLI report it: `Run` and its `TaskInfo`s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.task import TaskError, TaskState

if TYPE_CHECKING:
    from headwater.engine.state import RunStateMachine


@dataclass
class TaskInfo:
    """One executor task as the run reports it."""

    name: str
    state: str
    cached: bool = False
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    log_path: str | None = None
    error: TaskError | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)

    resources: dict[str, Any] = field(default_factory=dict)
    #: Which executor ran the task ("local", "dask"; None when it never ran, or was cached).
    executor: str | None = None
    #: Which of the executor's workers ran its latest attempt (a host, a Dask worker address).
    worker: str | None = None
    #: Where its log was stored when it ran elsewhere (a URI beside its outputs), else None.
    log_uri: str | None = None
    #: The container it ran in (`{"runtime", "image", "digest"}`); None on the host.
    container: dict[str, str] | None = None
    #: The sandbox it ran in and what it enforced (`headwater.sandbox`); None: none.
    sandbox: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The `tasks[]` entry of `headwater run --json`; a failed task's adds its `error`."""
        entry: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "cached": self.cached,
            "executor": self.executor,
            "worker": self.worker,
            "container": self.container,
            "sandbox": self.sandbox,
        }
        if self.state == "FAILED":
            entry["error"] = None if self.error is None else vars(self.error)
        return entry

    def to_record(self) -> dict[str, Any]:
        """Everything known about the task, for the run record (`run.json`)."""
        record = {k: v for k, v in vars(self).items() if k != "error"}
        record["error"] = None if self.error is None else vars(self.error)
        return record


@dataclass
class Run:
    """A pipeline run: its identity, where it keeps things, and (when done) how it ended.

    `state` ends SUCCEEDED or FAILED, or INTERRUPTED when Ctrl-C or SIGTERM stopped the engine
    (the run can then be resumed). `error` says why a run failed: the first failed task's
    error record, or one with an empty `task` when the engine itself could not go on.
    """

    run_id: str
    pipeline: str
    run_dir: Path
    pipeline_root: str
    state: str = "RUNNING"
    outputs: dict[str, Any] = field(default_factory=dict)
    tasks: list[TaskInfo] = field(default_factory=list)
    error: TaskError | None = None
    created_at: str = ""
    duration: float = 0.0
    machine: RunStateMachine | None = field(default=None, repr=False)
    #: Says where its tasks run (the executor's `describe`), asked only when `where` is read.
    describe: Callable[[], str | None] = field(default=lambda: None, repr=False)
    #: Which tasks ran in their container images: auto, always or never (`--containers`).
    containers: str = "auto"

    @property
    def where(self) -> str | None:
        """Where its tasks run, when the executor says (a Dask cluster and its dashboard)."""
        return self.describe()

    @property
    def succeeded(self) -> bool:
        """True when the run finished in SUCCEEDED."""
        return self.state == "SUCCEEDED"

    def counts(self) -> dict[str, int]:
        """Executor tasks by state, with cached ones counted apart from succeeded."""
        counts = dict.fromkeys(
            ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CACHED", "SKIPPED", "CANCELED"), 0
        )
        if self.machine is None:
            return counts
        for _, state, task in self.machine.executor_tasks():
            key = state.value
            if key == "READY":  # waiting for its upstream, a free slot or its retry backoff
                key = "PENDING"
            if key == "SUCCEEDED" and task is not None and task.cached:
                key = "CACHED"
            counts[key] += 1
        return counts

    def running_tasks(self) -> list[str]:
        """Names of executor tasks running now."""
        if self.machine is None:
            return []
        return [n for n, s, _ in self.machine.executor_tasks() if s is TaskState.RUNNING]

    def to_json(self) -> dict[str, Any]:
        """The object `headwater run --json` prints."""
        return {
            "run_id": self.run_id,
            "state": self.state,
            "outputs": self.outputs,
            "tasks": [t.to_json() for t in self.tasks],
            "error": None if self.error is None else vars(self.error),
        }
