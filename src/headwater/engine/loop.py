"""The engine's main loop: admit ready tasks, consult the cache, wait for results, report."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from headwater.caching.base import TaskCache
from headwater.engine.hooks import RunHooks
from headwater.engine.resources import ResourcePool
from headwater.engine.result import Run, TaskInfo
from headwater.engine.state import RunStateMachine
from headwater.errors import UserError
from headwater.executors.base import Executor
from headwater.task import Launch, TaskError, TaskResult, TaskState


class EngineLoop:
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
        *,
        resume: bool = False,
    ) -> None:
        self.machine = machine
        self.executor = executor
        self.pool = pool
        self.cache = cache
        self.enable_cache = enable_cache
        self.hooks = hooks
        self.run_ = run
        self.python_path = python_path
        self.resume = resume
        self.queue: list[Launch] = []
        self.launches: dict[int, Launch] = {}

    def run(self) -> None:
        """Drive the run to its end (or re-raise what interrupted it, after cleaning up)."""
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
                    warning = self.pool.check(launch)
                except UserError as exc:
                    error = TaskError(launch.name, "ResourceError", str(exc))
                    self._feed(TaskResult(launch.task_id, error=error, retryable=False))
                    continue
                if warning is not None:
                    for hook in self.hooks:
                        hook.on_task_warning(run=self.run_, launch=launch, message=warning)
                if not self._cached(launch):
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
                self.launches.pop(result.task_id, None)
                self._feed(result)

    def _cached(self, launch: Launch) -> bool:
        """Look the task up once, when it becomes ready; feed a hit back as its result."""
        if launch.cache_enabled:
            try:
                launch.fingerprint = self.cache.fingerprint(launch=launch)
            except OSError:  # an input we cannot read: the task runs (and reports it)
                launch.fingerprint = ""
        if not (self.enable_cache or self.resume):
            return False
        hit = self.cache.lookup(launch=launch, key=launch.fingerprint)
        if hit is None or not (self.enable_cache or hit.resumed):
            return False
        result = TaskResult(
            launch.task_id,
            outputs=hit.outputs,
            cached=True,
            cached_from=hit.source,
            resumed=hit.resumed,
            artifact_ids=hit.artifact_ids,
        )
        self._feed(result)
        return True

    def _admit(self) -> None:
        waiting = []
        for launch in self.queue:
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
