"""The run state machine: a tree of DAG instances whose tasks move from PENDING to a final state.

No processes here. `RunStateMachine.ready()` hands out executor tasks that may start;
`finish()` takes their results back. Everything else (conditions, loops, nested DAGs, fan-in,
exit handlers, retries, OneOf, output selection) happens inside, so it is tested with plain
function calls (see tests/unit/engine/test_state.py).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.errors import ConditionError, HeadwaterError, UserError
from headwater.spec.ir import ComponentSpec, PipelineIR, TaskSpec, is_control_flow_task
from headwater.spec.placeholders import PlaceholderContext, resolve_value
from headwater.spec.types import coerce, protojson
from headwater.task import Launch, Outputs, TaskError, TaskResult, TaskState

#: Final-status strings as KFP's backend reports them to exit handlers (MLMD states).
FINAL_STATUS = {
    TaskState.SUCCEEDED: "COMPLETE",
    TaskState.FAILED: "FAILED",
    TaskState.CANCELED: "CANCELED",
    TaskState.SKIPPED: "SKIPPED",
}


@dataclass(frozen=True)
class RunContext:
    """Run-wide facts that tasks see through placeholders and artifact URIs."""

    run_id: str
    job_name: str
    pipeline_root: str
    run_dir: Path
    create_time_utc: str
    env: Mapping[str, str] = field(default_factory=dict)
    #: Builds `<root>/<part>/...` URIs, refusing parts that would leave the root.
    artifact_uri: Callable[..., str] | None = None


class _UnavailableError(Exception):
    """An input whose producer did not produce it (skipped, failed, or no such output)."""

    def __init__(self, message: str, *, skipped: bool) -> None:
        super().__init__(message)
        self.skipped = skipped


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
    failing: bool = False
    state: TaskState = TaskState.RUNNING
    outputs: Outputs = field(default_factory=Outputs)

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
    attempts: int = 0
    not_before: float = 0.0
    error: TaskError | None = None
    launch: Launch | None = None
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def is_executor(self) -> bool:
        """True for tasks that run a container/Python executor or an importer."""
        return self.component.executor_label is not None


_SELECTOR = re.compile(r"""\[\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|(\d+))\s*\]""")


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
        self._dags: list[DagRun] = [self.root]
        self._populate(self.root)
        self._ready: list[TaskRun] = []
        self._stopped = False
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
                launch = self._launch(task)
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
        if result.ok:
            assert result.outputs is not None
            task.cached = result.cached
            task.cached_from = result.cached_from
            task.resumed = result.resumed
            task.artifact_ids = result.artifact_ids
            self._complete(task, result.outputs)
        else:
            retry = task.spec.retry
            retryable = retry is not None and result.retryable and not self._failing(task)
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

    def executor_tasks(self) -> Iterator[tuple[str, TaskState, TaskRun | None]]:
        """Every executor task to report: (display name, state, run or None if never made)."""
        yield from self._report(self.root)

    def outputs(self) -> dict[str, Any]:
        """The pipeline's outputs: parameter values; artifacts as dicts (lists for lists)."""
        result: dict[str, Any] = {}
        declared = self.ir.root.interface
        for name, value in self.root.outputs.parameters.items():
            pdef = declared.output_parameters.get(name)
            result[name] = coerce(value, pdef.type, name=name) if pdef else value
        for name, arts in self.root.outputs.artifacts.items():
            adef = declared.output_artifacts.get(name)
            shaped = [_public_artifact(a) for a in arts]
            result[name] = shaped if (adef and adef.is_list) else (shaped[0] if shaped else None)
        return result

    # -- building the tree ----------------------------------------------------------------

    def _populate(self, dag: DagRun) -> None:
        assert dag.component.dag is not None
        for spec in dag.component.dag.tasks.values():
            self._next_id += 1
            component = self.ir.component(spec.component)
            name = f"{dag.prefix}{spec.name}{dag.suffix}"
            task = TaskRun(self._next_id, spec, dag, name, component)
            dag.tasks[spec.name] = task
            self.tasks[task.id] = task

    def _child(self, task: TaskRun, index: int | None, item: Any = None) -> DagRun:
        prefix = task.dag.prefix
        if not is_control_flow_task(task.spec.name):
            prefix = f"{prefix}{task.spec.name}."
        suffix = task.dag.suffix + (f"[{index}]" if index is not None else "")
        params = dict(task.parameters)
        artifacts = dict(task.artifacts)
        it = task.spec.iterator
        if it is not None and index is not None:
            if it.kind == "parameter":
                pdef = task.component.interface.input_parameters.get(it.item_input)
                params[it.item_input] = (
                    coerce(item, pdef.type, name=it.item_input) if pdef else item
                )
            else:
                artifacts[it.item_input] = [item]
        child = DagRun(task.component, params, artifacts, task, prefix=prefix, suffix=suffix)
        self._populate(child)
        task.children.append(child)
        self._dags.append(child)
        return child

    # -- advancing ------------------------------------------------------------------------

    def _advance(self) -> None:
        changed = True
        while changed:
            changed = False
            for dag in list(self._dags):
                if dag.state.final or not dag.active:
                    continue
                for task in dag.tasks.values():
                    if task.state is TaskState.PENDING and self._try_start(task):
                        changed = True
                if all(t.state.final for t in dag.tasks.values()):
                    self._close_dag(dag)
                    changed = True
            self._dags = [d for d in self._dags if not d.state.final]

    def _failing(self, task: TaskRun) -> bool:
        return any(d.failing for d in task.dag.ancestors())

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
            self._failing(task)
            or any(u.state in (TaskState.FAILED, TaskState.CANCELED) for u in upstream)
        ):
            self._finalize(task, TaskState.CANCELED)
            return True
        try:
            self._resolve_inputs(task)
        except _UnavailableError as exc:
            if exc.skipped:
                self._finalize(task, TaskState.SKIPPED)
            else:
                self._fail(task, TaskError(task.name, "InputUnavailable", str(exc)))
            return True
        except HeadwaterError as exc:
            self._fail(task, TaskError(task.name, type(exc).__name__, str(exc)))
            return True
        if task.spec.condition is not None:
            try:
                taken = task.spec.condition.evaluate(task.parameters)
            except ConditionError as exc:
                self._fail(task, TaskError(task.name, "ConditionError", str(exc)))
                return True
            if not taken:
                self._finalize(task, TaskState.SKIPPED)
                return True
        if task.is_executor:
            executor = self.ir.executors[task.component.executor_label or ""]
            if "importer" in executor:
                self._import(task, executor["importer"])
            else:
                task.state = TaskState.READY
                self._ready.append(task)
            return True
        task.state = TaskState.RUNNING
        task.started_at = time.time()
        if task.spec.iterator is None:
            self._child(task, None)
            return True
        try:
            items = self._loop_items(task)
        except UserError as exc:
            self._fail(task, TaskError(task.name, type(exc).__name__, str(exc)))
            return True
        for index, item in enumerate(items):
            self._child(task, index, item).active = False
        self._activate_iterations(task)
        if not items:
            self._complete(task, self._collect(task))
        return True

    def _activate_iterations(self, task: TaskRun) -> None:
        limit = task.spec.parallelism or len(task.children)
        running = sum(1 for c in task.children if c.active and not c.state.final)
        for child in task.children:
            if running >= limit and not self._failing(task):
                break
            if not child.active:
                child.active = True
                running += 1

    def _loop_items(self, task: TaskRun) -> list[Any]:
        it = task.spec.iterator
        assert it is not None
        if it.kind == "artifact":
            return list(task.artifacts.get(it.input_name or "", []))
        if it.raw is not None:
            items = protojson(it.raw)
        else:
            items = task.parameters.get(it.input_name or "")
        if isinstance(items, str):
            import json

            with contextlib.suppress(ValueError):
                items = json.loads(items)
        if not isinstance(items, list):
            raise UserError(f"ParallelFor over {it.input_name!r} needs a list, got {items!r:.80}")
        return list(items)

    # -- inputs ---------------------------------------------------------------------------

    def _resolve_inputs(self, task: TaskRun) -> None:
        declared = task.component.interface
        params: dict[str, Any] = {}
        # Constants last: they may hold placeholders over the task's other inputs (f-strings,
        # `set_cpu_limit(param)` compile to `'{{$.inputs.parameters['pipelinechannel--x']}}'`).
        ordered = sorted(task.spec.parameter_inputs.items(), key=lambda i: "runtimeValue" in i[1])
        for name, sel in ordered:
            pdef = declared.input_parameters.get(name)
            try:
                value = self._parameter(task, sel, params)
            except _UnavailableError:
                if pdef is not None and (pdef.optional or pdef.has_default):
                    continue
                raise
            if pdef is not None and pdef.type not in ("TASK_FINAL_STATUS", "TASK_CONFIG"):
                value = coerce(value, pdef.type, name=name, what=f"task {task.name!r} input")
            params[name] = value
        for name, pdef in declared.input_parameters.items():
            # KFP's driver fills inputs the task leaves out from the component's defaults.
            if name not in params and pdef.has_default:
                params[name] = coerce(protojson(pdef.default), pdef.type, name=name)
        artifacts: dict[str, list[dict[str, Any]]] = {}
        for name, sel in task.spec.artifact_inputs.items():
            adef = declared.input_artifacts.get(name)
            try:
                artifacts[name] = self._artifact(task, sel)
            except _UnavailableError:
                if adef is not None and adef.optional:
                    continue
                raise
        task.parameters = params
        task.artifacts = artifacts

    def _producer(self, task: TaskRun, name: str) -> TaskRun:
        producer = task.dag.tasks.get(name)
        if producer is None:
            raise _UnavailableError(f"no task {name!r} in the DAG of {task.name!r}", skipped=False)
        if producer.state is not TaskState.SUCCEEDED:
            raise _UnavailableError(
                f"task {task.name!r} needs an output of {producer.name!r}, which "
                f"{producer.state.value.lower()}",
                skipped=producer.state is TaskState.SKIPPED,
            )
        return producer

    def _parameter(self, task: TaskRun, sel: Mapping[str, Any], resolved: dict[str, Any]) -> Any:
        if "runtimeValue" in sel:
            ctx = self._ctx(task, {"inputs": {"parameterValues": resolved}})
            return resolve_value(protojson(sel["runtimeValue"].get("constant")), ctx)
        if "componentInputParameter" in sel:
            name = sel["componentInputParameter"]
            if name not in task.dag.parameters:
                raise _UnavailableError(f"input {name!r} was not given", skipped=False)
            value = task.dag.parameters[name]
            if sel.get("parameterExpressionSelector"):
                value = _select(value, sel["parameterExpressionSelector"], task.name)
            return value
        if "taskOutputParameter" in sel:
            ref = sel["taskOutputParameter"]
            producer = self._producer(task, ref["producerTask"])
            key = ref["outputParameterKey"]
            if key not in producer.outputs.parameters:
                raise _UnavailableError(
                    f"task {producer.name!r} produced no output parameter {key!r}",
                    skipped=not producer.is_executor,
                )
            value = producer.outputs.parameters[key]
            if sel.get("parameterExpressionSelector"):
                value = _select(value, sel["parameterExpressionSelector"], task.name)
            return value
        if "taskFinalStatus" in sel:
            producer = task.dag.tasks[sel["taskFinalStatus"]["producerTask"]]
            status: dict[str, Any] = {
                "state": FINAL_STATUS.get(producer.state, producer.state.value),
                "pipelineJobResourceName": self.context.job_name,
                "pipelineTaskName": producer.name,
                "error": {},
            }
            if producer.state is TaskState.FAILED:
                err = self._first_error(producer)
                status["error"] = {"code": 1, "message": err.message if err else "failed"}
            return status
        raise UserError(f"task {task.name!r}: unsupported parameter input {dict(sel)!r:.120}")

    def _artifact(self, task: TaskRun, sel: Mapping[str, Any]) -> list[dict[str, Any]]:
        if "componentInputArtifact" in sel:
            name = sel["componentInputArtifact"]
            if name not in task.dag.artifacts:
                raise _UnavailableError(f"input artifact {name!r} was not given", skipped=False)
            return task.dag.artifacts[name]
        if "taskOutputArtifact" in sel:
            ref = sel["taskOutputArtifact"]
            producer = self._producer(task, ref["producerTask"])
            key = ref["outputArtifactKey"]
            if key not in producer.outputs.artifacts:
                raise _UnavailableError(
                    f"task {producer.name!r} produced no output artifact {key!r}",
                    skipped=not producer.is_executor,
                )
            return producer.outputs.artifacts[key]
        raise UserError(f"task {task.name!r}: unsupported artifact input {dict(sel)!r:.120}")

    def _first_error(self, task: TaskRun) -> TaskError | None:
        if task.error is not None:
            return task.error
        for child in task.children:
            for sub in child.tasks.values():
                if sub.state is TaskState.FAILED:
                    return self._first_error(sub)
        return None

    # -- executors ------------------------------------------------------------------------

    def _ctx(
        self, task: TaskRun, executor_input: dict[str, Any] | None = None
    ) -> PlaceholderContext:
        return PlaceholderContext(
            executor_input=executor_input or {"inputs": {"parameterValues": task.parameters}},
            job_name=self.context.job_name,
            job_resource_name=self.context.job_name,
            job_uuid=self.context.run_id,
            task_name=task.spec.name,
            task_uuid=f"{self.context.run_id}-{task.id}",
            pipeline_root=self.context.pipeline_root,
            create_time_utc=self.context.create_time_utc,
            schedule_time_utc=self.context.create_time_utc,
            workspace_path=str(self.context.run_dir / "workspace"),
        )

    def task_dir(self, task: TaskRun) -> str:
        """A file-system-safe, run-unique directory name for a task."""
        return re.sub(r"[^A-Za-z0-9._-]", "_", task.name)

    def _launch(self, task: TaskRun) -> Launch:
        from headwater.engine.resources import resource_request

        iface = task.component.interface
        label = task.component.executor_label or ""
        container = dict(self.ir.executors[label]["container"])
        workdir = self.context.run_dir / "tasks" / self.task_dir(task)
        root = self.context.pipeline_root.rstrip("/")
        parts = (self.ir.name, self.context.run_id, self.task_dir(task))
        uri = self.context.artifact_uri or (lambda *p: "/".join((root, *p)))
        executor_input: dict[str, Any] = {
            "inputs": {
                "parameterValues": task.parameters,
                "artifacts": {n: {"artifacts": a} for n, a in task.artifacts.items()},
            },
            "outputs": {
                "parameters": {
                    n: {"outputFile": str(workdir / "outputs" / n)} for n in iface.output_parameters
                },
                "artifacts": {
                    n: {
                        "artifacts": [
                            {
                                "name": n,
                                "type": {
                                    "schemaTitle": a.schema_title,
                                    "schemaVersion": a.schema_version,
                                },
                                "uri": uri(*parts, n),
                                "metadata": {},
                            }
                        ]
                    }
                    for n, a in iface.output_artifacts.items()
                },
                "outputFile": str(workdir / "executor_output.json"),
            },
        }
        ctx = self._ctx(task, executor_input)
        env = {str(e["name"]): str(e.get("value", "")) for e in container.get("env") or []}
        env = {k: str(resolve_value(v, ctx)) for k, v in env.items()}
        return Launch(
            task_id=task.id,
            name=task.name,
            component=task.spec.component,
            executor_label=label,
            container=container,
            executor_input=executor_input,
            placeholders=ctx,
            workdir=workdir,
            log_path=workdir / "log.txt",
            env=env,
            resources=resource_request(container.get("resources") or {}, ctx),
            output_types={n: p.type for n, p in iface.output_parameters.items()},
            attempt=task.attempts,
            cache_enabled=task.spec.enable_cache,
            cache_key=task.spec.cache_key,
        )

    def _import(self, task: TaskRun, importer: Mapping[str, Any]) -> None:
        ctx = self._ctx(task)
        uri_spec = importer.get("artifactUri") or {}
        if "constant" in uri_spec:
            uri = resolve_value(uri_spec["constant"], ctx)
        else:
            uri = task.parameters.get("uri")
        if not uri:
            self._fail(task, TaskError(task.name, "ImporterError", "importer has no artifact URI"))
            return
        type_ = importer.get("typeSchema") or {}
        artifact = {
            "name": "artifact",
            "type": {
                "schemaTitle": type_.get("schemaTitle", "system.Artifact"),
                "schemaVersion": type_.get("schemaVersion", "0.0.1"),
            },
            "uri": str(uri),
            "metadata": resolve_value(protojson(importer.get("metadata") or {}), ctx),
        }
        self._complete(task, Outputs(artifacts={"artifact": [artifact]}))

    # -- completion -----------------------------------------------------------------------

    def _finalize(self, task: TaskRun, state: TaskState) -> None:
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
        dag.state = _combined({t.state for t in dag.tasks.values()})
        dag.outputs = self._dag_outputs(dag)
        parent = dag.parent
        if parent is None:
            return
        if parent.spec.iterator is not None:
            self._activate_iterations(parent)
            if not all(c.state.final for c in parent.children):
                return
            state = _combined({c.state for c in parent.children})
        else:
            state = dag.state
        if state is TaskState.FAILED:
            self._fail(parent, None)
        elif state is TaskState.CANCELED:
            self._finalize(parent, TaskState.CANCELED)
        elif parent.spec.iterator is None:
            self._complete(parent, dag.outputs)
        else:
            self._complete(parent, self._collect(parent))

    def _collect(self, loop: TaskRun) -> Outputs:
        """Fan-in: each loop output is the list of its iterations' values, in order."""
        collected = Outputs()
        iface = loop.component.interface
        for name in iface.output_parameters:
            collected.parameters[name] = [
                c.outputs.parameters[name] for c in loop.children if name in c.outputs.parameters
            ]
        for name in iface.output_artifacts:
            collected.artifacts[name] = [
                a for c in loop.children for a in c.outputs.artifacts.get(name, [])
            ]
        return collected

    def _dag_outputs(self, dag: DagRun) -> Outputs:
        assert dag.component.dag is not None
        out = Outputs()
        for name, spec in dag.component.dag.output_parameters.items():
            selectors = []
            if "valueFromParameter" in spec:
                selectors = [spec["valueFromParameter"]]
            elif "valueFromOneof" in spec:
                selectors = list(spec["valueFromOneof"].get("parameterSelectors") or [])
            for sel in selectors:
                producer = dag.tasks.get(sel["producerSubtask"])
                if producer is not None and producer.state is TaskState.SUCCEEDED:
                    key = sel["outputParameterKey"]
                    if key in producer.outputs.parameters:
                        out.parameters[name] = producer.outputs.parameters[key]
                        break
        for name, spec in dag.component.dag.output_artifacts.items():
            for sel in spec.get("artifactSelectors") or []:
                producer = dag.tasks.get(sel["producerSubtask"])
                if producer is not None and producer.state is TaskState.SUCCEEDED:
                    key = sel["outputArtifactKey"]
                    if key in producer.outputs.artifacts:
                        out.artifacts[name] = producer.outputs.artifacts[key]
                        break
        return out

    # -- reporting ------------------------------------------------------------------------

    def _report(self, dag: DagRun) -> Iterator[tuple[str, TaskState, TaskRun | None]]:
        for task in dag.tasks.values():
            if task.is_executor:
                yield task.name, task.state, task
            elif task.children:
                for child in task.children:
                    yield from self._report(child)
            else:
                prefix = dag.prefix
                if not is_control_flow_task(task.spec.name):
                    prefix = f"{prefix}{task.spec.name}."
                state = task.state
                if task.spec.iterator is not None and state is TaskState.SUCCEEDED:
                    state = TaskState.SKIPPED  # a loop over no items: its body never ran
                yield from self._report_static(task.component, prefix, dag.suffix, state)

    def _report_static(
        self, component: ComponentSpec, prefix: str, suffix: str, state: TaskState
    ) -> Iterator[tuple[str, TaskState, TaskRun | None]]:
        """The executor tasks inside a DAG task that never ran, all in the DAG task's state."""
        if component.dag is None:
            return
        for spec in component.dag.tasks.values():
            sub = self.ir.component(spec.component)
            if sub.executor_label is not None:
                yield f"{prefix}{spec.name}{suffix}", state, None
            else:
                inner = prefix if is_control_flow_task(spec.name) else f"{prefix}{spec.name}."
                yield from self._report_static(sub, inner, suffix, state)


def _combined(states: set[TaskState]) -> TaskState:
    """The state of a DAG from its tasks' final states."""
    if TaskState.FAILED in states:
        return TaskState.FAILED
    if TaskState.CANCELED in states:
        return TaskState.CANCELED
    return TaskState.SUCCEEDED


def _select(value: Any, expression: str, task: str) -> Any:
    """Apply a `parameterExpressionSelector` such as `parseJson(string_value)["a"]`."""
    import json

    text = expression.strip()
    if text.startswith("parseJson(string_value)"):
        rest = text[len("parseJson(string_value)") :]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise UserError(f"task {task!r}: {value!r:.60} is not JSON") from exc
    elif text.startswith("string_value"):
        rest = text[len("string_value") :]
    else:
        raise UserError(f"task {task!r}: unsupported parameterExpressionSelector {expression!r}")
    pos = 0
    for match in _SELECTOR.finditer(rest):
        if match.start() != pos:
            break
        key, alt, index = match.groups()
        try:
            value = (
                value[int(index)] if index is not None else value[key if key is not None else alt]
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise UserError(
                f"task {task!r}: {expression!r} selects nothing in {value!r:.80}"
            ) from exc
        pos = match.end()
    if pos != len(rest):
        raise UserError(f"task {task!r}: unsupported parameterExpressionSelector {expression!r}")
    return value


def _public_artifact(artifact: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": artifact.get("name", ""),
        "type": (artifact.get("type") or {}).get("schemaTitle", "system.Artifact"),
        "uri": artifact.get("uri", ""),
        "metadata": artifact.get("metadata") or {},
    }
