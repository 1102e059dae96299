"""What the terminal shows during a run: a live status line on a TTY, plain lines otherwise."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from headwater.config import home_command
from headwater.engine.hooks import RunHooks
from headwater.task import TaskState

if TYPE_CHECKING:
    from headwater.engine.result import Run
    from headwater.engine.state import TaskRun
    from headwater.task import Launch

LOG_TAIL_LINES = 20
#: The IR component name of `headwater.components.registry.register_model` (KFP adds "-2",
#: "-3" to a second and third use in one pipeline).
REGISTER_COMPONENT = "comp-register-model"
#: How much of a task log `-v` reads at a time, and at most per task per tick while the task
#: runs (the rest follows on later ticks, and all of it when the task ends): memory stays
#: bounded whatever a task prints, and a chatty task cannot hold up the engine's loop.
STREAM_CHUNK = 256 * 1024
STREAM_TICK_BUDGET = 4 * STREAM_CHUNK


def log_tail(path: str | None, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last `lines` lines of a task log (empty if there is none)."""
    if not path or not os.path.isfile(path):
        return []
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 64 * 1024))
        text = fh.read().decode("utf-8", "replace")
    return text.splitlines()[-lines:]


class ConsoleReporter(RunHooks):
    """Report a run on a stream (stderr by default).

    Each task start and end is one plain line, and the end of the run names the models it
    registered. On a TTY one status line below them is redrawn in place too: counts of tasks
    by state, elapsed time and the names of running tasks. With `verbose`, task output is
    streamed as it is written, each line prefixed by the task name.
    """

    def __init__(
        self, stream: IO[str] | None = None, *, verbose: bool = False, live: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.verbose = verbose
        self._started = time.monotonic()
        self._logs: dict[str, _LogFollower] = {}
        self._status_shown = False
        #: "NAME:VERSION" of each model a `register_model` task of the run registered.
        self._registered: list[str] = []

    def _write(self, line: str) -> None:
        if self._status_shown:
            self.stream.write("\r\033[K")
            self._status_shown = False
        self.stream.write(line + "\n")
        self.stream.flush()

    def before_run(self, *, run: Run) -> None:
        self._started = time.monotonic()
        self._write(f"headwater: run {run.run_id} of {run.pipeline!r} started")
        if run.where:  # where its tasks run (a cluster's dashboard)
            self._write(f"headwater: {run.where}")
        self._write(f"headwater: logs in {run.run_dir / 'tasks'}")

    def before_task(self, *, run: Run, launch: Launch) -> None:
        if self.verbose:
            self._logs[launch.name] = _LogFollower(str(launch.log_path))
        attempt = f" (attempt {launch.attempt})" if launch.attempt > 1 else ""
        self._write(f"  started   {launch.name}{attempt}")

    def after_task(self, *, run: Run, task: TaskRun, state: TaskState) -> None:
        self._stream_log(task.name, final=True)
        took = ""
        if task.started_at is not None:
            took = f" in {time.time() - task.started_at:.2f}s"
        if state is TaskState.SUCCEEDED:
            self._note_registration(task)
        if task.cached:
            self._write(f"  cached    {task.name}")
        elif state is TaskState.SUCCEEDED:
            self._write(f"  succeeded {task.name}{took}")
        elif state is TaskState.FAILED:
            err = task.error
            retrying = task.state is TaskState.READY
            what = "failed, will retry" if retrying else "FAILED"
            message = f"{err.error_type}: {err.message}" if err else "failed"
            self._write(f"  {what} {task.name}{took}: {message}")
            if not retrying and err is not None and err.log_path:
                self._write(f"  log: {err.log_path}")

    def on_task_warning(self, *, run: Run, launch: Launch, message: str) -> None:
        self._write(f"headwater: warning: {message}")

    def on_run_warning(self, *, run: Run, message: str) -> None:
        self._write(f"headwater: warning: {message}")

    def on_tick(self, *, run: Run) -> None:
        for name in list(self._logs):
            self._stream_log(name, final=False)
        if not self.live:
            return
        counts = run.counts()
        shown = " ".join(f"{k.lower()}={v}" for k, v in counts.items() if v)
        running = ", ".join(run.running_tasks()[:4])
        elapsed = time.monotonic() - self._started
        line = f"[{elapsed:6.1f}s] {shown}" + (f" | {running}" if running else "")
        try:
            width = os.get_terminal_size(self.stream.fileno()).columns or 120
        except (OSError, ValueError):
            width = 120
        self.stream.write("\r\033[K" + line[: max(20, width - 1)])
        self.stream.flush()
        self._status_shown = True

    def _stream_log(self, name: str, *, final: bool) -> None:
        follower = self._logs.get(name)
        if follower is None:
            return
        prefix = f"{name} | "
        for lines in follower.read(final=final):
            self._write_block("".join(f"{prefix}{line}\n" for line in lines))
        if final:
            del self._logs[name]

    def _write_block(self, text: str) -> None:
        """Write whole lines at once (a chunk of a task's output), below the status line."""
        if self._status_shown:
            self.stream.write("\r\033[K")
            self._status_shown = False
        self.stream.write(text)
        self.stream.flush()

    def after_run(self, *, run: Run) -> None:
        counts = run.counts()
        shown = ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v)
        self._write(f"headwater: run {run.run_id} {run.state} in {run.duration:.2f}s ({shown})")
        for model in self._registered:
            serve = home_command("serve", model)
            self._write(f"headwater: registered model {model}; serve it with: {serve}")
        if run.state == "INTERRUPTED":
            resume = home_command("run", "--resume", run.run_id)
            self._write(f"headwater: resume it with: {resume}")

    def _note_registration(self, task: TaskRun) -> None:
        """Remember the model a `register_model` task registered (its `name`, `version`)."""
        if not task.component.name.startswith(REGISTER_COMPONENT):
            return
        name, version = task.outputs.parameters.get("name"), task.outputs.parameters.get("version")
        if isinstance(name, str) and isinstance(version, int):
            model = f"{name}:{version}"
            if model not in self._registered:
                self._registered.append(model)


class _LogFollower:
    """Reads a growing task log in bounded chunks and hands out its complete lines."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""  # the start of a line not ended yet (at most STREAM_CHUNK bytes)

    def read(self, *, final: bool) -> Iterator[list[str]]:
        """Yield the lines written since the last call, a chunk's worth at a time.

        While the task runs, at most STREAM_TICK_BUDGET bytes are read and a line not ended
        yet is kept for later; with `final` (the task ended) everything is read, to the end.
        A line longer than STREAM_CHUNK is handed out in pieces of that size.
        """
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 -- closed below, after the last chunk
        except OSError:
            return
        with fh:
            fh.seek(self.offset)
            budget = None if final else STREAM_TICK_BUDGET
            while budget is None or budget > 0:
                chunk = fh.read(STREAM_CHUNK)
                if not chunk:
                    break
                self.offset += len(chunk)
                if budget is not None:
                    budget -= len(chunk)
                data = self.partial + chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0 and len(data) >= STREAM_CHUNK:
                    cut = len(data)  # one very long line: pass it on in pieces
                self.partial = data[cut:]
                if cut:
                    yield data[:cut].decode("utf-8", "replace").splitlines()
        if final and self.partial:
            yield self.partial.decode("utf-8", "replace").splitlines()
            self.partial = b""
