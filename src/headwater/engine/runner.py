"""Running a pipeline: validate arguments, drive the state machine with an executor, report."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from headwater import config
from headwater.caching import FileTaskCache, TaskCache
from headwater.engine.hooks import RunHooks
from headwater.engine.model import Launch, TaskResult, TaskState
from headwater.engine.resources import ResourcePool, detect_gpus, machine_cpus, machine_memory
from headwater.engine.state import RunContext, RunStateMachine
from headwater.errors import ParameterError, TaskError, UserError
from headwater.executors.base import Executor
from headwater.spec.ir import PipelineIR
from headwater.spec.loader import load_pipeline
from headwater.spec.types import coerce, protojson


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

    def to_json(self) -> dict[str, Any]:
        """The `tasks[]` entry of `headwater run --json`."""
        return {"name": self.name, "state": self.state, "cached": self.cached}

    def to_record(self) -> dict[str, Any]:
        """Everything known about the task, for the run record (`run.json`)."""
        record = {k: v for k, v in vars(self).items() if k != "error"}
        record["error"] = None if self.error is None else vars(self.error)
        return record


@dataclass
class Run:
    """A pipeline run: its identity, where it keeps things, and (when done) how it ended."""

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
        }


def bind_arguments(ir: PipelineIR, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Check pipeline arguments against the root's inputs; apply defaults; coerce types.

    Raises:
        ParameterError: An unknown name, a missing required parameter, or a mistyped value.
    """
    declared = ir.root.interface.input_parameters
    unknown = sorted(set(arguments) - set(declared) - set(ir.root.interface.input_artifacts))
    if unknown:
        valid = ", ".join(sorted(declared)) or "none"
        raise ParameterError(
            f"unknown parameter {unknown[0]!r} for pipeline {ir.name!r} (parameters: {valid})"
        )
    bound: dict[str, Any] = {}
    for name, pdef in declared.items():
        if name in arguments:
            bound[name] = coerce(arguments[name], pdef.type, name=name)
        elif pdef.has_default:
            bound[name] = coerce(protojson(pdef.default), pdef.type, name=name)
        elif not pdef.optional:
            raise ParameterError(
                f"missing required parameter {name!r} for pipeline {ir.name!r}: "
                f"pass it with --param {name}=VALUE"
            )
    return bound


def default_parallelism(cpus: int) -> int:
    """Most tasks at once when `--max-parallel` is not given: twice the CPUs.

    A task that declares no CPU request is admitted by slot alone, and a task's life includes
    process start, file I/O and exit, so two per core keeps both cores busy (measured: a 50-way
    fan-out of trivial tasks runs 20% faster than with one per core). Tasks that declare CPU
    are also bounded by the machine's CPU count (see `ResourcePool`).
    """
    return max(2, 2 * cpus)


def _artifact_arguments(ir: PipelineIR, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Pipeline-level input artifacts, given as URIs (or lists of URIs)."""
    result = {}
    for name, adef in ir.root.interface.input_artifacts.items():
        if name not in arguments:
            if not adef.optional:
                raise ParameterError(
                    f"missing required input artifact {name!r}: pass its URI with --param "
                    f"{name}=URI"
                )
            continue
        value = arguments[name]
        uris = value if isinstance(value, list) else [value]
        result[name] = [
            {
                "name": name,
                "type": {"schemaTitle": adef.schema_title, "schemaVersion": adef.schema_version},
                "uri": str(u.get("uri") if isinstance(u, dict) else u),
                "metadata": dict(u.get("metadata") or {}) if isinstance(u, dict) else {},
            }
            for u in uris
        ]
    return result


def run(
    pipeline: Any,
    arguments: Mapping[str, Any] | None = None,
    *,
    pipeline_name: str | None = None,
    executor: str | Executor = "local",
    max_parallel: int | None = None,
    cache: TaskCache | None = None,
    enable_cache: bool = True,
    pipeline_root: str | None = None,
    hooks: Sequence[RunHooks] = (),
    install_packages: bool = False,
) -> Run:
    """Run a KFP pipeline to completion and return the finished `Run`.

    Args:
        pipeline: A `@dsl.pipeline` object, or a path to a .py file or compiled IR.
        arguments: Pipeline parameters by name (and input artifacts as URIs).
        pipeline_name: Which pipeline of a .py file that defines several.
        executor: "local" or an `Executor` instance.
        max_parallel: Most tasks at once (default: twice the CPU count).
        cache: Where to look up and record task outputs (default: `$HEADWATER_HOME/cache`).
        enable_cache: False runs every task even if the cache has it (`--no-cache`).
        pipeline_root: Artifact root (default `$HEADWATER_HOME/artifacts`).
        hooks: Observers of the run's lifecycle.
        install_packages: Install missing `packages_to_install` into cached environments.

    Returns:
        The finished run; `run.state` is "SUCCEEDED" or "FAILED".

    Raises:
        UserError: The pipeline or its arguments are invalid (nothing has run).
    """
    own_executor = None
    if executor == "local":
        from headwater.executors.local import LocalExecutor

        # Started first: the fork server warms up while the pipeline loads.
        executor = own_executor = LocalExecutor()
    try:
        ir = load_pipeline(pipeline, pipeline_name=pipeline_name)
        return run_ir(
            ir,
            arguments or {},
            executor=executor,
            max_parallel=max_parallel,
            cache=cache,
            enable_cache=enable_cache,
            pipeline_root=pipeline_root,
            hooks=hooks,
            install_packages=install_packages,
        )
    finally:
        if own_executor is not None:
            own_executor.shutdown(kill=True)


def run_ir(
    ir: PipelineIR,
    arguments: Mapping[str, Any],
    *,
    executor: str | Executor = "local",
    max_parallel: int | None = None,
    cache: TaskCache | None = None,
    enable_cache: bool = True,
    pipeline_root: str | None = None,
    hooks: Sequence[RunHooks] = (),
    install_packages: bool = False,
) -> Run:
    """`run` for an already loaded pipeline."""
    from headwater.executors.packages import prepare_packages

    bound = bind_arguments(ir, arguments)
    artifacts = _artifact_arguments(ir, arguments)
    python_path = prepare_packages(ir, install=install_packages)
    if max_parallel is not None and max_parallel < 1:
        raise UserError(f"--max-parallel must be at least 1, got {max_parallel}")
    run_id = str(uuid.uuid4())
    created = datetime.now(timezone.utc)
    root = pipeline_root or config.pipeline_root()
    run_dir = config.runs_dir() / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    context = RunContext(
        run_id=run_id,
        job_name=f"{ir.name}-{created:%Y%m%d%H%M%S}",
        pipeline_root=root,
        run_dir=run_dir,
        create_time_utc=created.isoformat().replace("+00:00", "Z"),
    )
    machine = RunStateMachine(ir, bound, context, artifact_inputs=artifacts)
    result = Run(
        run_id, ir.name, run_dir, root, created_at=context.create_time_utc, machine=machine
    )
    cpus = machine_cpus()
    pool = ResourcePool(
        slots=max_parallel or default_parallelism(cpus),
        cpu=float(cpus),
        memory=machine_memory(),
        gpus=detect_gpus(),
    )
    own: Executor | None = None
    if executor == "local":
        from headwater.executors.local import LocalExecutor

        backend: Executor = (own := LocalExecutor())
    elif isinstance(executor, Executor):
        backend = executor
    else:
        raise UserError(f"unknown executor {executor!r} (known executors: local)")
    loop = _Loop(
        machine,
        backend,
        pool,
        cache or FileTaskCache(config.cache_dir()),
        enable_cache,
        hooks,
        result,
        python_path,
    )
    try:
        loop.run()
    finally:
        if own is not None:
            own.shutdown(kill=True)
    return result


class _Loop:
    """The engine's main loop: admit ready tasks, wait for results, feed them back."""

    tick = 0.1

    def __init__(
        self,
        machine: RunStateMachine,
        executor: Executor,
        pool: ResourcePool,
        cache: TaskCache,
        enable_cache: bool,
        hooks: Sequence[RunHooks],
        run: Run,
        python_path: tuple[str, ...],
    ) -> None:
        self.machine = machine
        self.executor = executor
        self.pool = pool
        self.cache = cache
        self.enable_cache = enable_cache
        self.hooks = hooks
        self.run_ = run
        self.python_path = python_path
        self.queue: list[Launch] = []
        self.launches: dict[int, Launch] = {}
        # Recording results (cache entries) happens off the scheduling path, in order.
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="headwater-record")

    def run(self) -> None:
        started = time.monotonic()
        for hook in self.hooks:
            hook.before_run(run=self.run_)
        try:
            self._loop()
        except BaseException:
            self.executor.cancel()
            self.machine.interrupt("the engine was interrupted")
            self._finish(started)
            raise
        self._finish(started)

    def _loop(self) -> None:
        machine = self.machine
        last_tick = 0.0
        while not machine.done:
            for launch in machine.ready():
                launch.python_path = self.python_path
                try:
                    self.pool.check(launch)
                except UserError as exc:
                    error = TaskError(launch.name, "ResourceError", str(exc))
                    self._feed(TaskResult(launch.task_id, error=error, retryable=False))
                    continue
                self.queue.append(launch)
            self._admit()
            if machine.done:
                break
            now = time.monotonic()
            if now - last_tick >= self.tick:
                last_tick = now
                for hook in self.hooks:
                    hook.on_tick(run=self.run_)
            timeouts = [self.tick]
            wakeup = machine.next_wakeup()
            if wakeup is not None:
                timeouts.append(wakeup)
            if self.executor.running() == 0 and not self.queue:
                if wakeup is None:
                    # Nothing runs and nothing will: the state machine is stuck (a bug of ours).
                    raise RuntimeError("run is stalled: no task running or ready")
                time.sleep(wakeup)
                continue
            for result in self.executor.wait(min(timeouts)):
                self.pool.release(result.task_id)
                launch = self.launches.pop(result.task_id)
                if result.ok and result.outputs is not None and launch.cache_enabled:
                    self.writer.submit(self.cache.record, launch=launch, outputs=result.outputs)
                self._feed(result)

    def _admit(self) -> None:
        waiting = []
        for launch in self.queue:
            if self.enable_cache and launch.cache_enabled:
                hit = self.cache.lookup(launch=launch)
                if hit is not None:
                    self._feed(TaskResult(launch.task_id, outputs=hit, cached=True))
                    continue
            if not self.pool.try_acquire(launch):
                waiting.append(launch)
                continue
            self.machine.started(launch.task_id)
            for hook in self.hooks:
                hook.before_task(run=self.run_, launch=launch)
            self.launches[launch.task_id] = launch
            self.executor.submit(launch)
        self.queue = waiting

    def _feed(self, result: TaskResult) -> None:
        self.machine.finish(result)
        task = self.machine.tasks[result.task_id]
        state = TaskState.FAILED if not result.ok else TaskState.SUCCEEDED
        for hook in self.hooks:
            hook.after_task(run=self.run_, task=task, state=state)

    def _finish(self, started: float) -> None:
        self.writer.shutdown(wait=True)
        run = self.run_
        machine = self.machine
        run.duration = time.monotonic() - started
        run.state = "SUCCEEDED" if machine.state is TaskState.SUCCEEDED else "FAILED"
        run.outputs = machine.outputs() if run.succeeded else {}
        run.tasks = []
        for name, state, task in machine.executor_tasks():
            info = TaskInfo(name, state.value)
            if task is not None:
                info.cached = task.cached
                info.attempts = task.attempts
                info.started_at = task.started_at
                info.finished_at = task.finished_at
                info.error = task.error
                info.inputs = dict(task.parameters)
                info.outputs = dict(task.outputs.parameters)
                if task.launch is not None:
                    info.log_path = str(task.launch.log_path)
                    info.resources = {k: v for k, v in vars(task.launch.resources).items() if v}
                if task.error is not None and run.error is None and state is TaskState.FAILED:
                    run.error = task.error
            run.tasks.append(info)
        # Report tasks in the order they started; never-started ones (skipped, canceled) last.
        run.tasks.sort(key=lambda t: (t.started_at is None, t.started_at or 0.0))
        record = {
            **run.to_json(),
            "tasks": [t.to_record() for t in run.tasks],
            "pipeline": run.pipeline,
            "created_at": run.created_at,
            "duration_s": round(run.duration, 3),
            "pipeline_root": run.pipeline_root,
            "error": None if run.error is None else vars(run.error),
        }
        (run.run_dir / "run.json").write_text(json.dumps(record, indent=2, default=str))
        for hook in self.hooks:
            hook.after_run(run=run)
