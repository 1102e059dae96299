"""What the terminal shows during a run: a live status line on a TTY, plain lines otherwise."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from headwater.cli.loops import loop_of
from headwater.config import home_command
from headwater.engine.hooks import RunHooks
from headwater.logs import MARKER_LEN, cut_so_far, tail_lines
from headwater.task import TaskState

if TYPE_CHECKING:
    from headwater.engine.result import Run
    from headwater.engine.state import TaskRun
    from headwater.task import Launch

LOG_TAIL_LINES = 20
#: The IR component names of the tuning steps of `headwater.hpo.tune` (`-2`, ... likewise).
TUNING_CREATE, TUNING_SUGGEST, TUNING_COMPLETE = (
    "comp-create-experiment",
    "comp-suggest-trials",
    "comp-complete-trials",
)
#: The IR component name of `headwater.components.registry.register_model` (KFP adds "-2",
#: "-3" to a second and third use in one pipeline).
REGISTER_COMPONENT = "comp-register-model"
#: How much of a task log `-v` reads at a time, and at most per task per tick while the task
#: runs (the rest follows on later ticks, and all of it when the task ends): memory stays
#: bounded whatever a task prints, and a chatty task cannot hold up the engine's loop.
STREAM_CHUNK = 256 * 1024
STREAM_TICK_BUDGET = 4 * STREAM_CHUNK
#: How many iterations of each loop get their own lines (and, with `-v`, their output); the
#: rest are counted, on a line every `LOOP_EVERY` seconds and once at the end. Failures are
#: always shown.
LOOP_LINES = 5
LOOP_EVERY = 5.0


def log_tail(path: str | None, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last `lines` lines of a task log, from at most its last 64 KiB (empty if there is
    none)."""
    if not path or not os.path.isfile(path):
        return []
    return tail_lines(path, lines, limit=64 * 1024)[0]


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
        self.tuning = TuningProgress()
        self.loops = LoopProgress()
        self._status_at = 0.0
        self._status_cost = 0.0

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
        if not self.loops.started(launch.name, launch.attempt):
            return  # an iteration of a big loop: counted, not listed
        if self.verbose:
            self._logs[launch.name] = _LogFollower(str(launch.log_path), launch.log_limit)
        if self.tuning.spare(launch.name, launch.component, _parameters(launch)):
            return  # a tuning round the run did not ask for: it only passes its input on
        attempt = f" (attempt {launch.attempt})" if launch.attempt > 1 else ""
        self._write(f"  started   {launch.name}{attempt}")

    def after_task(self, *, run: Run, task: TaskRun, state: TaskState) -> None:
        self._stream_log(task.name, final=True)
        took = ""
        if task.started_at is not None:
            took = f" in {time.time() - task.started_at:.2f}s"
        retrying = state is TaskState.FAILED and task.state is TaskState.READY
        said = "RETRYING" if retrying else "CACHED" if task.cached else state.value
        listed = self.loops.ended(task.name, said)
        if state is TaskState.SUCCEEDED:
            self._note_registration(task)
            if self.tuning.finished(task):
                return  # a tuning round the run did not ask for, counted apart at the end
        if not listed and state is not TaskState.FAILED:
            return  # an iteration of a big loop: counted
        if task.cached:
            self._write(f"  cached    {task.name}")
        elif state is TaskState.SUCCEEDED:
            self._write(f"  succeeded {task.name}{took}")
        if state is TaskState.SUCCEEDED and (line := self.tuning.progress(task)):
            self._write(line)
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
            for line in self.loops.lines(every=LOOP_EVERY):
                self._write(line)
            return
        now = time.monotonic()
        if now - self._status_at < 20 * self._status_cost:
            return  # a run of many tasks: redrawn less often, at most 5% of the engine's time
        self._status_at = now
        counts = self.tuning.counts(run.counts())
        shown = " ".join(f"{k.lower()}={v}" for k, v in counts.items() if v)
        running = ", ".join(run.running_tasks()[:4])
        self._status_cost = time.monotonic() - now
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
        for line in self.loops.lines(every=0.0):
            self._write(line)
        counts = self.tuning.counts(run.counts())
        shown = ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v)
        self._write(f"headwater: run {run.run_id} {run.state} in {run.duration:.2f}s ({shown})")
        if self.tuning.spare_rounds:
            self._write(f"headwater: {self.tuning.spare_summary()}")
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


def _parameters(launch: Launch) -> dict[str, Any]:
    values = launch.executor_input.get("inputs", {}).get("parameterValues", {})
    return values if isinstance(values, dict) else {}


class TuningProgress:
    """What a `headwater.hpo.tune` pipeline's rounds show: "round N of M" with the best
    trial so far, and the rounds unrolled in the pipeline but not asked for by the run apart.

    A tuning pipeline holds `max_rounds` rounds and runs trials in the first `rounds`: the
    steps of each later one pass the experiment on unchanged. They are not the run's work,
    so they are neither listed nor counted as pending or succeeded.
    """

    def __init__(self) -> None:
        #: Per tuning pipeline (the task-name prefix): its objective, minimized or not, and
        #: how many steps of rounds not asked for it holds.
        self._objective: dict[str, tuple[str, bool]] = {}
        self._expected: dict[str, int] = {}
        self._started: set[str] = set()
        self._finished: set[str] = set()
        #: How many rounds not asked for have ended (their empty trial loop reads SKIPPED).
        self._ended = 0
        self.spare_rounds = 0
        self.asked = 0

    def spare(self, name: str, component: str, parameters: dict[str, Any]) -> bool:
        """True for a step of a round the run did not ask for (noted as started)."""
        if not component.startswith((TUNING_SUGGEST, TUNING_COMPLETE)):
            return False
        number, rounds = parameters.get("round_number"), parameters.get("rounds")
        if isinstance(number, int) and isinstance(rounds, int) and 0 < rounds < number:
            self._started.add(name)
            return True
        return False

    def finished(self, task: TaskRun) -> bool:
        """Note a step that succeeded; True when it was one of a round not asked for."""
        prefix = task.name.rpartition(".")[0]
        params = task.parameters
        if task.component.name.startswith(TUNING_CREATE):
            rounds, built = params.get("rounds"), params.get("max_rounds")
            objective = params.get("objective")
            if isinstance(objective, str):
                self._objective[prefix] = (objective, bool(params.get("minimize")))
            if isinstance(rounds, int) and isinstance(built, int) and 0 < rounds < built:
                self._expected[prefix] = 2 * (built - rounds)  # a suggest and a complete each
                self.spare_rounds += built - rounds
                self.asked = rounds
            return False
        if not self.spare(task.name, task.component.name, params):
            return False
        self._finished.add(task.name)
        if task.component.name.startswith(TUNING_COMPLETE):
            self._ended += 1
        return True

    def progress(self, task: TaskRun) -> str:
        """ "tuning round N of M: ..., best so far ..." for a round's `complete-trials`."""
        if not task.component.name.startswith(TUNING_COMPLETE):
            return ""
        number, rounds = task.parameters.get("round_number"), task.parameters.get("rounds")
        if not isinstance(number, int) or not isinstance(rounds, int) or number < 1:
            return ""
        prefix = task.name.rpartition(".")[0]
        objective, minimize = self._objective.get(prefix, ("objective", False))
        best = task.outputs.parameters.get("best_objective")
        where = task.outputs.parameters.get("best_parameters") or {}
        made = (task.outputs.artifacts.get("updated_experiment") or [{}])[0].get("metadata", {})
        trials = ""
        if isinstance(made.get("completed"), int) and isinstance(made.get("failed"), int):
            done, failed = made["completed"], made["failed"]
            trials = f"{done} of {done + failed} trials completed, "
        shown = f"{best:.6g}" if isinstance(best, (int, float)) else str(best)
        at = " ".join(f"{k}={_number(v)}" for k, v in where.items())
        which = "lowest" if minimize else "highest"
        return (
            f"headwater: tuning round {number} of {rounds}: {trials}best so far {objective}="
            f"{shown} ({which}) at {at}"
        )

    def counts(self, counts: dict[str, int]) -> dict[str, int]:
        """`Run.counts()` without the steps of rounds not asked for."""
        if not self._expected:
            return counts
        spare = sum(self._expected.values())
        started, finished = len(self._started), len(self._finished)
        shown = dict(counts)
        shown["SUCCEEDED"] = max(0, shown.get("SUCCEEDED", 0) - finished)
        shown["RUNNING"] = max(0, shown.get("RUNNING", 0) - (started - finished))
        # Each round not asked for holds a trial loop too, pending until it turns out empty.
        waiting = (spare - started) + (self.spare_rounds - self._ended)
        shown["PENDING"] = max(0, shown.get("PENDING", 0) - waiting)
        shown["SKIPPED"] = max(0, shown.get("SKIPPED", 0) - self._ended)
        return shown

    def spare_summary(self) -> str:
        """The line that says how many rounds were left out, and why."""
        rounds = self.spare_rounds
        return (
            f"{rounds} more tuning round{'s' if rounds != 1 else ''} built into the pipeline "
            f"started no trials (the run asked for rounds={self.asked}): not counted above"
        )


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value, default=str)


class _LogFollower:
    """Reads a growing task log in bounded chunks and hands out its complete lines.

    It starts where the log ends now (an earlier attempt's output was streamed already). A
    log capped at `limit` bytes (`headwater.logs`) moves back what follows its cut marker at
    each rotation; the follower moves back with it, and past what was cut meanwhile.
    """

    def __init__(self, path: str, limit: int | None = None) -> None:
        self.path = path
        self.limit = limit
        self.offset = 0
        self.cut = 0  # what the log had cut when last read
        if os.path.isfile(path):  # an earlier attempt's log, streamed already and maybe cut
            with open(path, "rb") as fh:
                self.offset = os.fstat(fh.fileno()).st_size
                if limit is not None and self.offset > limit // 2:
                    self.cut = cut_so_far(fh, limit)
        self.skipped = 0  # what was cut before the follower read it, not said yet
        self.partial = b""  # the start of a line not ended yet (at most STREAM_CHUNK bytes)

    def _follow_cuts(self, fh: IO[bytes]) -> None:
        if self.limit is None or os.fstat(fh.fileno()).st_size <= self.limit // 2:
            return
        head, cut = self.limit // 2, cut_so_far(fh, self.limit)
        body = head + MARKER_LEN  # where what follows the marker starts
        if cut != self.cut and self.offset > head:
            # Where the follower is in the task's output: the file was the output until the
            # first cut; since, its part after the marker is the output after what was cut.
            place = self.offset if not self.cut else head + self.cut + max(0, self.offset - body)
            moved = body + place - (head + cut)
            if moved < body:  # some was cut before it was read
                self.skipped += body - moved
            self.offset = max(body, moved)
        self.cut = cut

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
            self._follow_cuts(fh)
            if self.skipped:  # the line begun before the cut ends there
                start = self.partial.decode("utf-8", "replace").splitlines()
                note = f"===== headwater: {self.skipped:,} bytes of output cut here ====="
                yield [*start, note]
                self.partial, self.skipped = b"", 0
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


class LoopProgress:
    """Which iterations of each loop a run's progress lists, and counts of the rest.

    The first `LOOP_LINES` iterations of a loop to start are listed as any task is; from the
    next one on, the loop's iterations are counted by state, and `lines` says the counts.
    """

    def __init__(self) -> None:
        self._listed: dict[str, set[str]] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._changed: set[str] = set()
        self._said = 0.0

    def started(self, name: str, attempt: int) -> bool:
        """Note that `name` started; whether it is listed."""
        loop = loop_of(name)
        if loop is None:
            return True
        listed = self._listed.setdefault(loop, set())
        if name in listed or (len(listed) < LOOP_LINES and attempt == 1):
            listed.add(name)
            return True
        self._count(loop, "RUNNING", 1)
        return False

    def ended(self, name: str, state: str) -> bool:
        """Note that `name` ended in `state` ("CACHED" for a cache hit, "RETRYING" for a
        failed attempt to be retried); whether it is listed."""
        loop = loop_of(name)
        if loop is None:
            return True
        listed = self._listed.setdefault(loop, set())
        if name in listed:
            return True
        if state == "CACHED" and len(listed) < LOOP_LINES:  # a hit never started
            listed.add(name)
            return True
        if state != "CACHED":
            self._count(loop, "RUNNING", -1)
        if state != "RETRYING":
            self._count(loop, state, 1)
        return False

    def _count(self, loop: str, state: str, change: int) -> None:
        counts = self._counts.setdefault(loop, {})
        counts[state] = counts.get(state, 0) + change
        self._changed.add(loop)

    def lines(self, *, every: float) -> list[str]:
        """A line of counts for each loop that changed, if `every` seconds passed since the
        last ones."""
        now = time.monotonic()
        if not self._changed or now - self._said < every:
            return []
        self._said = now
        lines = []
        for loop in sorted(self._changed):
            counts = self._counts[loop]
            shown = ", ".join(f"{n:,} {s.lower()}" for s, n in sorted(counts.items()) if n)
            lines.append(f"  loop      {loop}: {shown} (past its first {LOOP_LINES})")
        self._changed.clear()
        return lines
