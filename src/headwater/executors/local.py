"""`LocalExecutor`: tasks as forked processes of a warm fork server on this machine."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.connection
import os
import sys
from pathlib import Path
from typing import Any

from headwater.engine.model import Launch, TaskResult
from headwater.errors import TaskError
from headwater.executors.base import Executor
from headwater.executors.launcher import ERROR_FILE, run_task
from headwater.executors.outputs import OutputError, collect_outputs
from headwater.spec.placeholders import resolve_args

_EXECUTOR_MAIN = "kfp.dsl.executor_main"


def python_program(container: dict[str, Any]) -> tuple[str, list[str]] | None:
    """For a lightweight Python component, return (function source, raw args); else None.

    The compiled command is `sh -c <pip prelude> sh -ec <write $0 to a file; run executor_main>
    <source>`; we take the source and skip the shell and its pip install.
    """
    command = [str(c) for c in container.get("command") or []]
    for i, part in enumerate(command[:-1]):
        if _EXECUTOR_MAIN in part and "ephemeral_component.py" in part:
            return command[i + 1], [str(a) for a in container.get("args") or []]
    return None


class LocalExecutor(Executor):
    """Run each attempt in its own process, forked from a server that has imported KFP.

    A fresh interpreter importing KFP costs ~0.1-1 s; a fork of a warm one costs milliseconds.
    Each task is still its own process, so a crash, a leak or `os._exit` in one task cannot
    touch the engine or another task.
    """

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["headwater.executors._preload"])
        self._procs: dict[int, tuple[Any, Launch]] = {}

    def submit(self, launch: Launch) -> None:
        """Fork a process for `launch` and return at once."""
        launch.workdir.mkdir(parents=True, exist_ok=True)
        (launch.workdir / "outputs").mkdir(exist_ok=True)
        stale = launch.workdir / ERROR_FILE
        stale.unlink(missing_ok=True)
        Path(launch.executor_input["outputs"]["outputFile"]).unlink(missing_ok=True)
        for spec in launch.executor_input["outputs"]["artifacts"].values():
            for art in spec["artifacts"]:
                Path(art["uri"]).parent.mkdir(parents=True, exist_ok=True)
        payload = self._payload(launch)
        proc = self._ctx.Process(target=run_task, args=(payload,), name=launch.name, daemon=False)
        proc.start()
        self._procs[proc.sentinel] = (proc, launch)

    def _payload(self, launch: Launch) -> dict[str, Any]:
        env = {**os.environ, **launch.env}
        env.setdefault("PYTHONUNBUFFERED", "1")
        payload: dict[str, Any] = {
            "log_path": str(launch.log_path),
            "workdir": str(launch.workdir),
            "env": env,
            "python_path": list(launch.python_path),
        }
        program = python_program(launch.container)
        if program is not None:
            source, args = program
            payload.update(kind="python", source=source, args=resolve_args(args, launch.placeholders))
        else:
            argv = resolve_args(launch.container.get("command") or [], launch.placeholders)
            argv += resolve_args(launch.container.get("args") or [], launch.placeholders)
            if argv and argv[0] in ("python3", "python"):
                # Images run their own python3; here that is this environment's interpreter.
                argv[0] = sys.executable
            payload.update(kind="command", argv=argv)
            (launch.workdir / "executor_input.json").write_text(json.dumps(launch.executor_input))
        return payload

    def wait(self, timeout: float | None) -> list[TaskResult]:
        """Wait for attempts to end and turn each into a `TaskResult`."""
        if not self._procs:
            return []
        ready = multiprocessing.connection.wait(list(self._procs), timeout)
        results = []
        for sentinel in ready:
            proc, launch = self._procs.pop(sentinel)  # type: ignore[call-overload]
            proc.join()
            results.append(self._result(launch, proc.exitcode))
            proc.close()
        return results

    def _result(self, launch: Launch, exitcode: int | None) -> TaskResult:
        if exitcode == 0:
            try:
                return TaskResult(launch.task_id, outputs=collect_outputs(launch))
            except OutputError as exc:
                return TaskResult(launch.task_id, error=self._error(launch, "OutputError", str(exc), 0))
        record_path = launch.workdir / ERROR_FILE
        if record_path.is_file():
            try:
                record = json.loads(record_path.read_text(encoding="utf-8"))
                return TaskResult(
                    launch.task_id,
                    error=TaskError(
                        task=launch.name,
                        error_type=record.get("error_type", "Error"),
                        message=record.get("message", ""),
                        traceback=record.get("traceback", ""),
                        exit_code=exitcode,
                        log_path=str(launch.log_path),
                    ),
                )
            except ValueError:
                pass
        if exitcode is not None and exitcode < 0:
            message = f"killed by signal {-exitcode}"
        else:
            message = f"exited with code {exitcode}"
        return TaskResult(launch.task_id, error=self._error(launch, "ExitCode", message, exitcode))

    @staticmethod
    def _error(launch: Launch, kind: str, message: str, code: int | None) -> TaskError:
        return TaskError(launch.name, kind, message, exit_code=code, log_path=str(launch.log_path))

    def running(self) -> int:
        """Attempts in flight."""
        return len(self._procs)

    def shutdown(self, *, kill: bool = False) -> None:
        """Terminate what is still running when `kill`; otherwise wait for it."""
        for proc, _ in list(self._procs.values()):
            if kill:
                proc.terminate()
            proc.join(timeout=5)
            if proc.exitcode is None:
                proc.kill()
                proc.join()
        self._procs.clear()
