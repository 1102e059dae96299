"""Warm workers: a process with the engine imported that forks one worker per run, ready before
the run arrives.

A fresh interpreter that imports the engine and the store costs ~0.5 s before a run's first
task, most of `create_run` to first task. The launcher pays it once: `headwater server`
starts it (`python -m headwater.server.launcher`), it imports what a run needs, and keeps one
*spare*: a forked worker, in a session of its own, whose executor is warming up (for the
local executor, its task fork server is already starting) while it waits for a run. A run
handed to the launcher goes to the spare at once, and a new spare is forked behind it.

Protocol, one JSON object per line: the server writes `{"run_id": ID}` to the launcher's
stdin; the launcher answers `{"ready": true}` once it has imported the engine, then
`{"run_id": ID, "pid": P}` when a worker has the run and `{"run_id": ID, "exit": CODE}` when
that worker ended (see `server.worker` for the codes). When stdin closes (the server exited
or was killed) the launcher stops its spare and exits; workers with a run go on, each its
run's engine, found again by the next server through the pid and start time they recorded.

Each worker writes its output to `LOG_DIR/RUN_ID.log`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from typing import IO, Any

from headwater.server.worker import WorkerSettings, run_one

__all__ = ["main"]

#: The longest wait before forking a spare after spares kept dying without a run.
_MAX_RESPAWN_WAIT_S = 5.0


def _report(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class _Spare:
    """A forked worker waiting for its run on a pipe."""

    def __init__(self, settings: WorkerSettings, log_dir: str) -> None:
        sandboxed = settings.sandboxed_at_start(_multi_user(settings))
        read, self._write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            os.close(self._write)
            code = 1
            try:
                code = _serve(read, settings, log_dir, sandboxed)
            except BaseException:  # said in the run's log (or nowhere, before it has one)
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(read)
        self.pid = pid

    def take(self, run_id: str) -> bool:
        """Hand the spare its run; False if it is gone."""
        try:
            os.write(self._write, (run_id + "\n").encode())
        except OSError:
            return False
        finally:
            os.close(self._write)
        return True

    def stop(self) -> None:
        """Stop the spare (it has no run)."""
        self.discard()  # EOF: it exits without running anything
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)

    def discard(self) -> None:
        """Close this end of the spare's pipe (the spare died, or is being stopped)."""
        with contextlib.suppress(OSError):
            os.close(self._write)


def _multi_user(settings: WorkerSettings) -> bool:
    """Whether the server is multi-user now (its spare's tasks are then sandboxed, unless
    --no-sandbox); a store that cannot be read says no (the worker decides again)."""
    if settings.sandbox != "auto" or settings.trusted_proxy:
        return settings.trusted_proxy
    from headwater.api.principals import has_principals
    from headwater.errors import HeadwaterError

    try:
        return has_principals(settings.metadata_url)
    except HeadwaterError:
        return False


def _serve(read: int, settings: WorkerSettings, log_dir: str, sandboxed: bool) -> int:
    """A spare's life: warm up, wait for a run id, run it."""
    os.setsid()  # its own session: terminate signals it alone; it outlives the server
    _to_log(os.devnull)  # off the launcher's pipes, which are the server's protocol
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = None
    if settings.executor == "local":
        from headwater.executors.prestart import PrestartedServer

        server = PrestartedServer(sandboxed=sandboxed)
    with os.fdopen(read, "rb") as pipe:
        line = pipe.readline().decode().strip()
    if not line:
        if server is not None:
            server.close()
        return 0
    _to_log(os.path.join(log_dir, f"{line}.log"))
    return run_one(line, settings, server=server)


def _to_log(path: str) -> None:
    """Send this process's stdout and stderr to `path`; stdin reads nothing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(devnull)


def _warm() -> None:
    """Import what every run needs, once, so that each fork starts with it."""
    import headwater.api.running
    import headwater.engine.runner
    import headwater.executors.local
    import headwater.metadata.lite
    import headwater.metadata.sql
    import headwater.spec.ir  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Serve runs from stdin until it closes; see the module docstring."""
    parser = WorkerSettings.parser("headwater.server.launcher")
    parser.add_argument("--log-dir", required=True)
    args = parser.parse_args(argv)
    settings = WorkerSettings.of(args)
    os.makedirs(args.log_dir, exist_ok=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops us by closing stdin
    _warm()
    _report({"ready": True})
    running: dict[int, str] = {}
    spare: _Spare | None = None
    stdin: IO[bytes] = sys.stdin.buffer
    pending = b""
    deaths, respawn_at = 0, 0.0  # spares that died one after another: fork the next later
    try:
        while True:
            if spare is None and time.monotonic() >= respawn_at:
                spare = _Spare(settings, args.log_dir)
            readable, _, _ = select.select([stdin], [], [], 0.2)
            if _reap(running, -1 if spare is None else spare.pid) and spare is not None:
                spare.discard()
                spare, deaths = None, deaths + 1
                respawn_at = time.monotonic() + min(0.1 * 2**deaths, _MAX_RESPAWN_WAIT_S)
            if not readable:
                continue
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                return 0
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                run_id = str(json.loads(line)["run_id"])
                if spare is None:
                    spare = _Spare(settings, args.log_dir)
                if spare.take(run_id):
                    running[spare.pid] = run_id
                    _report({"run_id": run_id, "pid": spare.pid})
                    deaths = 0
                else:
                    _report({"run_id": run_id, "exit": -1})
                spare = None
    finally:
        if spare is not None:
            spare.stop()


def _reap(running: dict[int, str], spare: int) -> bool:
    """Report the workers that ended; True if the spare (pid `spare`) died without a run."""
    spare_died = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return spare_died
        if pid == 0:
            return spare_died
        spare_died = spare_died or pid == spare
        run_id = running.pop(pid, None)
        if run_id is not None:
            _report({"run_id": run_id, "exit": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    sys.exit(main())
