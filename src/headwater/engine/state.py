"""The run state machine: a tree of DAG instances whose tasks move from PENDING to a final state.

No processes here. `RunStateMachine.ready()` hands out executor tasks that may start;
`finish()` takes their results back. Everything else (conditions, loops, nested DAGs, fan-in,
exit handlers, retries, OneOf, output selection) happens inside, so it is tested with plain
function calls (see tests/unit/engine/test_state.py).

The tree it moves is in `tree`, input resolution in `inputs`, launches in `launches`, and what a
run reports in `report`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from headwater import config
from headwater.engine.inputs import UnavailableError, loop_items, resolve_inputs
from headwater.engine.launches import build_launch, imported, task_dir
from headwater.engine.report import (
    Reported,
    collect,
    dag_outputs,
    pipeline_outputs,
    report,
    run_error,
)
from headwater.engine.tree import FINAL_STATUS, DagRun, RunContext, TaskRun, combined
from headwater.errors import EngineError, HeadwaterError, ResourceError
from headwater.spec.ir import PipelineIR, is_control_flow_task
from headwater.spec.types import coerce, protojson
from headwater.task import Launch, Outputs, TaskError, TaskResult, TaskState, iteration_name

__all__ = [
    "FINAL_STATUS",
    "DagRun",
    "Reported",
    "RunContext",
    "RunStateMachine",
    "TaskRun",
    "task_dir",
]


class RunStateMachine:
    """Drive one pipeline run through its DAG tree.

    Args:
        ir: The validated pipeline.
        arguments: Pipeline parameter values, already coerced to their declared types.
        context: Run-wide identifiers and locations.
        artifact_inputs: Pipeline-level input artifacts (`root.inputDefinitions.artifacts`).
        clock: Time source, replaceable in tests.
    """

    def __init__(
        self,
        ir: PipelineIR,
        arguments: Mapping[str, Any],
        context: RunContext,
        *,
        artifact_inputs: Mapping[str, list[dict[str, Any]]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ir = ir
        self.context = context
        self.clock = clock
        self._next_id = 0
        self.tasks: dict[int, TaskRun] = {}
        self.root = DagRun(ir.root, dict(arguments), dict(artifact_inputs or {}), None)
        #: What changed and was not looked at yet: a DAG just opened (None: all its tasks may
        #: start), or a task of it that just became final (its downstream tasks may start).
        #: Each change is looked at once, so a run costs what its tasks do, however many.
        self._changes: deque[tuple[DagRun, TaskRun | None]] = deque()
        #: For each DAG component (by identity), the tasks that wait on each of its tasks (by
        #: name, in IR order).
        self._downstream: dict[int, dict[str, list[str]]] = {}
        self._populate(self.root)
        self._ready: list[TaskRun] = []
        self._stopped = False
        self._open(self.root)
        self._advance()

    # -- public surface -------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True once the root DAG reached a final state."""
        return self.root.state.final

    @property
    def state(self) -> TaskState:
        """The run's state: RUNNING, then SUCCEEDED or FAILED."""
        if self.root.state is TaskState.CANCELED:
            return TaskState.FAILED
        return self.root.state

    @property
    def interrupted(self) -> bool:
        """True once `interrupt` stopped the run."""
        return self._stopped

    def ready(self) -> list[Launch]:
        """Executor tasks that may start now (their retry backoff, if any, has passed)."""
        now = self.clock()
        due = [t for t in self._ready if t.not_before <= now]
        self._ready = [t for t in self._ready if t.not_before > now]
        launches = []
        failed = False
        for task in due:
            task.attempts += 1
            try:
                launch = build_launch(self.ir, self.context, task)
            except HeadwaterError as exc:
                self._fail(task, TaskError(task.name, type(exc).__name__, str(exc)))
                failed = True
                continue
            task.launch = launch
            launches.append(launch)
        if failed:
            self._advance()
        return launches

    def started(self, task_id: int) -> None:
        """The executor took the task (it was admitted by the resource pool): now RUNNING."""
        task = self.tasks[task_id]
        task.state = TaskState.RUNNING
        task.started_at = time.time()

    def next_wakeup(self) -> float | None:
        """Seconds until a task waiting on retry backoff becomes ready, if any is waiting."""
        if not self._ready:
            return None
        return max(0.0, min(t.not_before for t in self._ready) - self.clock())

    def finish(self, result: TaskResult) -> None:
        """Record how an attempt ended; retry, complete or fail the task and move on."""
        task = self.tasks[result.task_id]
        if result.worker:
            task.worker = result.worker
        task.container = None if result.cached else result.container
        task.sandbox = None if result.cached else result.sandbox
        if result.log_uri:
            task.log_uri = result.log_uri
        if result.ok:
            task.cached = result.cached
            task.cached_from = result.cached_from
            task.resumed = result.resumed
            task.artifact_ids = result.artifact_ids
            task.failed_outcome = result.failed_outcome or ""
            self._complete(task, result.outputs or Outputs())
        else:
            retry = task.spec.retry
            retryable = retry is not None and result.retryable and not task.failing
            if retry is not None and retryable and task.attempts <= retry.max_retries:
                task.state = TaskState.READY
                task.not_before = self.clock() + retry.delay(task.attempts)
                task.error = result.error
                self._ready.append(task)
                return
            self._fail(task, result.error)
        self._advance()

    def interrupt(self, reason: str) -> None:
        """Stop the run: running tasks fail with `reason`, everything not started is canceled."""
        self._stopped = True
        for task in self.tasks.values():
            if task.state in (TaskState.RUNNING, TaskState.READY) and task.is_executor:
                self._fail(task, TaskError(task.name, "Interrupted", reason))
        self._ready.clear()
        self._advance()

    def report(self) -> Iterator[Reported]:
        """Every executor task to report, with its state and (if it failed) its error."""
        return report(self.ir, self.root)

    def executor_tasks(self) -> Iterator[tuple[str, TaskState, TaskRun | None]]:
        """Every executor task to report: (display name, state, run or None if never made)."""
        for entry in report(self.ir, self.root):
            yield entry.name, entry.state, entry.task

    def error(self) -> TaskError | None:
        """Why the run failed: the error of the first task that failed (None if none did)."""
        return run_error(self.tasks.values())

    def outputs(self) -> dict[str, Any]:
        """The pipeline's outputs: parameter values; artifacts as dicts (lists for lists)."""
        return pipeline_outputs(self.ir, self.root.outputs)

    # -- building the tree ----------------------------------------------------------------

    def _populate(self, dag: DagRun) -> None:
        if dag.component.dag is None:
            raise EngineError(f"component {dag.component.name!r} is not a DAG")
        for spec in dag.component.dag.tasks.values():
            self._next_id += 1
            component = self.ir.component(spec.component)
            name = f"{dag.prefix}{spec.name}{dag.suffix}"
            task = TaskRun(self._next_id, spec, dag, name, component)
            dag.tasks[spec.name] = task
            self.tasks[task.id] = task
        dag.open_tasks = len(dag.tasks)

    def _open(self, dag: DagRun) -> None:
        """Let `dag`'s tasks start (a loop iteration waits for its turn)."""
        dag.active = True
        self._changes.append((dag, None))

    def _child(
        self, task: TaskRun, index: int | None, item: Any = None, *, active: bool = True
    ) -> DagRun:
        prefix = task.dag.prefix
        if not is_control_flow_task(task.spec.name):
            prefix = f"{prefix}{task.spec.name}."
        suffix = task.dag.suffix if index is None else iteration_name(task.dag.suffix, index)
        params = dict(task.parameters)
        artifacts = dict(task.artifacts)
        it = task.spec.iterator
        if it is not None and index is not None:
            if it.kind == "parameter":
                params[it.item_input] = item
            else:
                artifacts[it.item_input] = [item]
        child = DagRun(
            task.component, params, artifacts, task, prefix=prefix, suffix=suffix, active=False
        )
        child.shielded = task.spec.all_upstream_completed
        self._populate(child)
        task.children.append(child)
        if active:
            self._open(child)
        return child

    # -- advancing ------------------------------------------------------------------------

    def _advance(self) -> None:
        """Start what may start and close what is done, until nothing changes."""
        changes = self._changes
        while changes:
            dag, changed = changes.popleft()
            if dag.state.final or not dag.active:
                continue
            if changed is None:
                candidates = list(dag.tasks.values())
            else:
                candidates = [dag.tasks[n] for n in self._waiting_on(dag, changed.spec.name)]
            for task in candidates:
                if task.state is TaskState.PENDING:
                    self._try_start(task)
            if dag.open_tasks == 0:
                self._close_dag(dag)

    def _waiting_on(self, dag: DagRun, name: str) -> list[str]:
        """The tasks of `dag` that wait on its task `name`."""
        table = self._downstream.get(id(dag.component))
        if table is None:
            table = {n: [] for n in dag.tasks}
            for task in dag.tasks.values():
                for up in self._upstream(task):
                    if up in table:
                        table[up].append(task.spec.name)
            self._downstream[id(dag.component)] = table
        return table[name]

    def _upstream(self, task: TaskRun) -> set[str]:
        names = set(task.spec.dependencies)
        for sel in task.spec.parameter_inputs.values():
            for key in ("taskOutputParameter", "taskFinalStatus"):
                if key in sel:
                    names.add(sel[key]["producerTask"])
        for sel in task.spec.artifact_inputs.values():
            if "taskOutputArtifact" in sel:
                names.add(sel["taskOutputArtifact"]["producerTask"])
        return names

    def _try_start(self, task: TaskRun) -> bool:
        """Start `task` if its upstream is final; return True when its state changed."""
        upstream = [task.dag.tasks[n] for n in self._upstream(task) if n in task.dag.tasks]
        if not all(u.state.final for u in upstream):
            return False
        if self._stopped:
            self._finalize(task, TaskState.CANCELED)
            return True
        if not task.spec.all_upstream_completed and (
            task.failing or any(u.state in (TaskState.FAILED, TaskState.CANCELED) for u in upstream)
        ):
            self._finalize(task, TaskState.CANCELED)
            return True
        try:
            self._start(task)
        except UnavailableError as exc:
            if exc.skipped:
                self._finalize(task, TaskState.SKIPPED)
            else:
                self._fail(task, TaskError(task.name, "InputUnavailable", str(exc)))
        except HeadwaterError as exc:
            # A condition that fails to evaluate, an input or loop item of the wrong type...:
            # the task fails with the reason, and the run reports it.
            self._fail(task, TaskError(task.name, type(exc).__name__, str(exc)))
        return True

    def _start(self, task: TaskRun) -> None:
        """Resolve `task`'s inputs and start it: queue it, import, or open its DAG(s)."""
        resolve_inputs(task, self.context)
        condition = task.spec.condition
        if condition is not None and not condition.evaluate(task.parameters):
            self._finalize(task, TaskState.SKIPPED)
            return
        if task.is_executor:
            executor = self.ir.executors[task.component.executor_label or ""]
            if "importer" in executor:
                self._import(task, executor["importer"])
            else:
                task.state = TaskState.READY
                self._ready.append(task)
            return
        it = task.spec.iterator
        if it is None:
            task.state = TaskState.RUNNING
            task.started_at = time.time()
            self._child(task, None)
            return
        items = loop_items(task)
        self._check_size(task, len(items))
        pdef = task.component.interface.input_parameters.get(it.item_input)
        if it.kind == "parameter" and pdef is not None:
            # Every item is checked before any iteration exists: a bad one fails the loop whole.
            items = [coerce(item, pdef.type, name=it.item_input) for item in items]
        task.state = TaskState.RUNNING
        task.started_at = time.time()
        for index, item in enumerate(items):
            self._child(task, index, item, active=False)
        self._activate_iterations(task)
        if not items:
            self._complete(task, collect(task))

    def _check_size(self, loop: TaskRun, items: int) -> None:
        """Refuse a loop whose iterations would take the run past `RunContext.max_tasks`."""
        dag = loop.component.dag
        made = len(self.tasks) + items * (len(dag.tasks) if dag is not None else 0)
        limit = self.context.max_tasks
        if made > limit:
            raise ResourceError(
                f"this loop over {items:,} items would make the run {made:,} tasks, over the "
                f"{limit:,} one run may have: loop over fewer items (batch them into lists), "
                f"or raise {config.MAX_TASKS_ENV} if the engine's machine has the memory "
                f"(about 15 KiB a task)"
            )

    def _activate_iterations(self, task: TaskRun) -> None:
        """Open the loop's next iterations, up to its `parallelism` (all once it is failing)."""
        children = task.children
        limit = task.spec.parallelism or len(children)
        while task.next_child < len(children) and (task.open_children < limit or task.failing):
            child = children[task.next_child]
            task.next_child += 1
            task.open_children += 1
            self._open(child)

    def _import(self, task: TaskRun, importer: Mapping[str, Any]) -> None:
        outputs = imported(self.context, task, importer)
        if outputs is None:
            self._fail(task, TaskError(task.name, "ImporterError", "importer has no artifact URI"))
        else:
            self._complete(task, outputs)

    # -- completion -----------------------------------------------------------------------

    def _finalize(self, task: TaskRun, state: TaskState) -> None:
        if not task.state.final:
            task.dag.open_tasks -= 1
            self._changes.append((task.dag, task))
        task.state = state
        task.finished_at = time.time()

    def _complete(self, task: TaskRun, outputs: Outputs) -> None:
        task.outputs = Outputs(
            {k: protojson(v) for k, v in outputs.parameters.items()}, dict(outputs.artifacts)
        )
        task.error = None
        self._finalize(task, TaskState.SUCCEEDED)

    def _fail(self, task: TaskRun, error: TaskError | None) -> None:
        task.error = error
        self._finalize(task, TaskState.FAILED)
        for dag in task.dag.ancestors():
            dag.failing = True

    def _close_dag(self, dag: DagRun) -> None:
        dag.state = combined({t.state for t in dag.tasks.values()})
        dag.outputs = dag_outputs(dag)
        parent = dag.parent
        if parent is None:
            return
        if parent.spec.iterator is not None:
            parent.open_children -= 1
            self._activate_iterations(parent)
            if parent.open_children or parent.next_child < len(parent.children):
                return
            state = combined({c.state for c in parent.children})
        else:
            state = dag.state
        if state is TaskState.FAILED:
            self._fail(parent, None)
        elif state is TaskState.CANCELED:
            self._finalize(parent, TaskState.CANCELED)
        elif parent.spec.iterator is None:
            self._complete(parent, dag.outputs)
        else:
            self._complete(parent, collect(parent))
