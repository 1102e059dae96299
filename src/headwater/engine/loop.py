"""The engine's main loop: admit ready tasks, consult the cache, wait for results, report."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from headwater import config
from headwater.caching.base import TaskCache
from headwater.engine.hooks import RunHooks
from headwater.engine.requests import TaskRequests, carry_out
from headwater.engine.result import Run, TaskInfo
from headwater.engine.state import RunStateMachine
from headwater.engine.waiting import Waiting
from headwater.errors import EngineError, ExecutorLostError, UserError
from headwater.executors.base import Admission, Executor
from headwater.task import Launch, TaskError, TaskResult, TaskState

#: What tasks running when the engine stops are told, and recorded with.
INTERRUPTED = "the engine was interrupted"


class EngineLoop:
    """The engine's main loop: admit ready tasks, wait for results, feed them back.

    However the loop ends, the run ends recorded: SUCCEEDED or FAILED when it ran to its
    end, INTERRUPTED (resumable) on Ctrl-C or SIGTERM (a `KeyboardInterrupt`, re-raised),
    FAILED with the cause when anything else stopped it (re-raised) or when its record could
    not be written (not raised: the run failed, and says why).
    """

    tick = 0.1

    def __init__(
        self,
        machine: RunStateMachine,
        executor: Executor,
        pool: Admission,
        cache: TaskCache,
        enable_cache: bool,
        hooks: Sequence[RunHooks],
        run: Run,
        *,
        resume: bool = False,
        requests: TaskRequests | None = None,
        store: Any = None,
    ) -> None:
        self.machine = machine
        #: Who carries out sandboxed tasks' requests, on which store (`engine.requests`).
        self.requests = requests
        self.store = store
        self.executor = executor
        self.pool = pool
        self.cache = cache
        self.enable_cache = enable_cache
        self.hooks = hooks
        self.run_ = run
        self.resume = resume
        self.queue = Waiting()

    def run(self) -> None:
        """Drive the run to its end (or re-raise what interrupted it, after recording it)."""
        started = time.monotonic()
        for hook in self.hooks:
            hook.before_run(run=self.run_)
        try:
            self._loop()
        except KeyboardInterrupt:
            self._stop(INTERRUPTED)
            self._finish(started, interrupted=True)
            raise
        except ExecutorLostError as exc:
            # Not the engine's fault, nor the tasks': the run fails with the cause, resumable.
            resume = config.home_command("run", "--resume", self.run_.run_id)
            why = (
                f"{exc}; resume it with: {resume}"
                f"{' ' + exc.resume_flags if exc.resume_flags else ''}"
            )
            self._stop(str(exc))
            self._finish(started, cause=TaskError("", type(exc).__name__, why))
            return
        except BaseException as exc:
            self._stop(f"the engine stopped: {type(exc).__name__}: {exc}")
            self._finish(started, cause=TaskError("", type(exc).__name__, str(exc)))
            raise
        self._finish(started)

    def _stop(self, reason: str) -> None:
        self.executor.cancel()
        self.machine.interrupt(reason)

    def _loop(self) -> None:
        machine = self.machine
        last_tick = 0.0
        while not machine.done:
            for launch in machine.ready():
                try:
                    warning = self.pool.check(launch)
                except UserError as exc:
                    error = TaskError(launch.name, "ResourceError", str(exc))
                    self._feed(TaskResult(launch.task_id, error=error, retryable=False))
                    continue
                if warning is not None:
                    for hook in self.hooks:
                        hook.on_task_warning(run=self.run_, launch=launch, message=warning)
                if launch.platform is not None and launch.attempt == 1:
                    for message in launch.platform.warnings:  # kfp-kubernetes settings ignored
                        for hook in self.hooks:
                            hook.on_task_warning(run=self.run_, launch=launch, message=message)
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
                    raise EngineError(
                        "run is stalled: no task is running or ready, yet the run is not done"
                    )
                time.sleep(wakeup)
                continue
            for result in self.executor.wait(min(timeouts)):
                self.pool.release(result.task_id)
                if result.requests:  # a sandboxed task's: carried out here, for it
                    asked = machine.tasks[result.task_id].launch
                    assert asked is not None
                    result = carry_out(self.requests, result, asked, self.run_.run_id, self.store)
                self._feed(result)

    def _cached(self, launch: Launch) -> bool:
        """Look the task up once, when it becomes ready; feed a hit back as its result."""
        key = ""
        began = time.time()
        if launch.cache_enabled:
            try:
                key = self.cache.fingerprint(launch=launch)
            except OSError:  # an input we cannot read: the task runs (and reports it)
                key = ""
        self.machine.tasks[launch.task_id].fingerprint = key
        if not (self.enable_cache or self.resume):
            return False
        hit = self.cache.lookup(launch=launch, key=key)
        if hit is None or not (self.enable_cache or hit.resumed):
            return False
        # A cache hit's times are those of the lookup that found it, as KFP reports one.
        self.machine.tasks[launch.task_id].started_at = began
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
        for launch in self.queue.admit(self.pool.try_acquire):
            devices = self.pool.device_env(launch.task_id)
            if devices:  # only tasks given GPUs pay for the copy
                launch = dataclasses.replace(launch, device_env=devices)
            self.machine.tasks[launch.task_id].executor = self.executor.name
            self.machine.started(launch.task_id)
            for hook in self.hooks:
                hook.before_task(run=self.run_, launch=launch)
            self.executor.submit(launch)

    def _feed(self, result: TaskResult) -> None:
        self.machine.finish(result)
        task = self.machine.tasks[result.task_id]
        state = TaskState.FAILED if not result.ok else TaskState.SUCCEEDED
        for hook in self.hooks:
            hook.after_task(run=self.run_, task=task, state=state)

    def _finish(
        self, started: float, *, interrupted: bool = False, cause: TaskError | None = None
    ) -> None:
        run = self.run_
        machine = self.machine
        run.duration = time.monotonic() - started
        if interrupted:
            run.state = "INTERRUPTED"
        elif cause is None and machine.state is TaskState.SUCCEEDED:
            run.state = "SUCCEEDED"
        else:
            run.state = "FAILED"
        run.outputs = machine.outputs() if run.succeeded else {}
        run.tasks = []
        for entry in machine.report():
            info = TaskInfo(entry.name, entry.state.value, error=entry.error)
            task = entry.task
            if task is not None:
                info.cached = task.cached
                info.attempts = task.attempts
                info.started_at = task.started_at
                info.finished_at = task.finished_at
                info.inputs = dict(task.parameters)
                info.outputs = dict(task.outputs.parameters)
                info.executor = task.executor or None
                info.worker = task.worker or None
                info.log_uri = task.log_uri or None
                info.container = task.container
                info.sandbox = task.sandbox
                if task.launch is not None:
                    info.log_path = str(task.launch.log_path)
                    info.resources = {k: v for k, v in vars(task.launch.resources).items() if v}
            run.tasks.append(info)
        # Report tasks in the order they started; never-started ones (skipped, canceled) last.
        run.tasks.sort(key=lambda t: (t.started_at is None, t.started_at or 0.0))
        run.error = cause or machine.error()
        try:
            write_record(run.run_dir / "run.json", self._record())
        except OSError as exc:
            # A full disk, a read-only directory: the run cannot end as recorded, so it fails,
            # and says why (in the store and on the CLI's stderr), instead of a traceback.
            run.state = "FAILED"
            run.outputs = {}
            why = exc.strerror or str(exc)
            run.error = TaskError(
                "",
                type(exc).__name__,
                f"could not write the run record {run.run_dir / 'run.json'}: {why}; free the "
                f"space (or fix the permissions), then: "
                f"{config.home_command('run', '--resume', run.run_id)}",
            )
        for hook in self.hooks:
            hook.after_run(run=run)

    def _record(self) -> dict[str, Any]:
        run = self.run_
        return {
            **run.to_json(),
            "tasks": [t.to_record() for t in run.tasks],
            "pipeline": run.pipeline,
            "created_at": run.created_at,
            "duration_s": round(run.duration, 3),
            "pipeline_root": run.pipeline_root,
            "containers": run.containers,
            "error": None if run.error is None else vars(run.error),
        }


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write `record` as JSON to `path`, whole or not at all.

    The text goes to a temporary file beside `path` that replaces it only once complete, so a
    reader never sees half a record; the temporary file is removed if writing fails.

    Raises:
        OSError: The file could not be written (full disk, no permission...).
    """
    text = json.dumps(record, indent=2, default=str)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
