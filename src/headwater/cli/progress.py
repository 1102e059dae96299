"""What the terminal shows during a run: a live status line on a TTY, plain lines otherwise."""

from __future__ import annotations

import os
import sys
import time
from typing import IO, TYPE_CHECKING

from headwater.engine.hooks import RunHooks
from headwater.task import TaskState

if TYPE_CHECKING:
    from headwater.engine.runner import Run
    from headwater.engine.state import TaskRun
    from headwater.task import Launch

LOG_TAIL_LINES = 20


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

    On a TTY one status line is redrawn in place: counts of tasks by state, elapsed time and
    the names of running tasks. Elsewhere each task start and end is one plain line. With
    `verbose`, task output is streamed as it is written, each line prefixed by the task name.
    """

    def __init__(
        self, stream: IO[str] | None = None, *, verbose: bool = False, live: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.verbose = verbose
        self._started = time.monotonic()
        self._offsets: dict[str, int] = {}
        self._logs: dict[str, str] = {}
        self._status_shown = False

    def _write(self, line: str) -> None:
        if self._status_shown:
            self.stream.write("\r\033[K")
            self._status_shown = False
        self.stream.write(line + "\n")
        self.stream.flush()

    def before_run(self, *, run: Run) -> None:
        self._started = time.monotonic()
        self._write(f"headwater: run {run.run_id} of {run.pipeline!r} started")
        self._write(f"headwater: logs in {run.run_dir / 'tasks'}")

    def before_task(self, *, run: Run, launch: Launch) -> None:
        self._logs[launch.name] = str(launch.log_path)
        if not self.live:
            attempt = f" (attempt {launch.attempt})" if launch.attempt > 1 else ""
            self._write(f"  started   {launch.name}{attempt}")

    def after_task(self, *, run: Run, task: TaskRun, state: TaskState) -> None:
        self._stream_log(task.name, final=True)
        took = ""
        if task.started_at is not None:
            took = f" in {time.time() - task.started_at:.2f}s"
        if task.cached:
            self._write(f"  cached    {task.name}")
        elif state is TaskState.SUCCEEDED and not self.live:
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
        if not self.verbose or name not in self._logs:
            return
        path = self._logs[name]
        try:
            with open(path, "rb") as fh:
                fh.seek(self._offsets.get(name, 0))
                data = fh.read()
        except OSError:
            return
        if not final:
            cut = data.rfind(b"\n") + 1
            data = data[:cut]
        self._offsets[name] = self._offsets.get(name, 0) + len(data)
        for line in data.decode("utf-8", "replace").splitlines():
            self._write(f"{name} | {line}")
        if final:
            self._logs.pop(name, None)
            self._offsets.pop(name, None)

    def after_run(self, *, run: Run) -> None:
        counts = run.counts()
        shown = ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v)
        self._write(f"headwater: run {run.run_id} {run.state} in {run.duration:.2f}s ({shown})")
