"""A fork server: one warm interpreter with KFP imported that forks a process per task.

Protocol, one JSON object per line: the engine writes `{"id": N, "payload": {...}}` to the
server's stdin; the server opens the task's log and forks, the child runs
`launcher.run_task(payload, output)` with its stdout and stderr a pipe the server passes on to
the log (`headwater.executors.task_logs`, under the log's size cap), and the server
writes `{"id": N, "pid": P}` when it started and `{"id": N, "exit": CODE}` when it ended
(a negative CODE is the signal that killed it), or `{"id": N, "error": {...}}` (an error
record) when it could not start it. When stdin closes (the engine exited or was
killed), the server terminates its children and exits, so no task outlives its engine.

Nothing a task starts outlives the task either. Each task is the leader of its own process
group, and on Linux both the server and every task are child subreapers
(`PR_SET_CHILD_SUBREAPER`): a process orphaned inside a task (a double-forked daemon, a child
in its own session) is adopted by its task while the task runs, and by the server once the
task has ended. So when a task ends, the server kills its group and every process it has
adopted, as Kubernetes does with what a container's main process leaves behind. A task's
processes are killed if the server itself dies (`PR_SET_PDEATHSIG`).

The one exception is a service a task starts on purpose to outlive it: a process in its own
session whose environment has `HEADWATER_SERVICE` set when it starts (`deploy_model`'s model
server, see `headwater.endpoints.supervisor`). The server leaves those running, as Kubernetes
leaves the Deployment a pipeline step created; `headwater endpoints stop` ends them.

Run as `python -m headwater.executors.forkserver`; the engine starts it (see `LocalExecutor`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

# SERVICE_ENV, set in a process's environment when it starts, marks a service a task started
# to outlive it (see the module docstring); its value names the service.
from headwater.config import SERVICE_ENV as SERVICE_ENV
from headwater.executors.task_logs import TaskLogs

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

_SERVICE_MARK = SERVICE_ENV.encode() + b"="

#: prctl(2), or None where there is none (not Linux): then only process groups are stopped.
Prctl = Callable[[int, int], int]


def _load_prctl() -> Prctl | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    function.restype = ctypes.c_int
    return lambda option, value: int(function(option, value, 0, 0, 0))


def _report(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _children() -> list[int]:
    """This process's children: its tasks and the leftovers of ended tasks it adopted."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        pass
    # Kernels without CONFIG_PROC_CHILDREN: scan every process's parent (slower, same answer).
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rpartition(b")")[2].split()
            except OSError:
                continue
            if len(fields) > 1 and int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _is_service(pid: int) -> bool:
    """True if `pid` started with `SERVICE_ENV` in its environment (False once it exited)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
    except OSError:
        return False
    return environ.startswith(_SERVICE_MARK) or b"\0" + _SERVICE_MARK in environ


def _leftovers(tasks: dict[int, int]) -> list[int]:
    """Children that are neither a running task nor a service: what ended tasks left."""
    return [pid for pid in _children() if pid not in tasks and not _is_service(pid)]


def _kill_adopted(tasks: dict[int, int]) -> None:
    """SIGKILL every child that is not a running task or a service: what ended tasks left.

    While a task runs, it is the subreaper of what it starts; a process reaches the server
    only once its task has ended, so none of these belongs to a running task. Killing one
    makes its own children ours in turn: the SIGCHLD of its death brings us back here.
    """
    for pid in _leftovers(tasks):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _next_exited() -> tuple[int, int] | None:
    """Reap one ended child: (pid, wait status), or None when none has ended."""
    pid, status = os.waitpid(-1, os.WNOHANG)
    return None if pid == 0 else (pid, status)


def _reap(tasks: dict[int, int], out: Any, logs: TaskLogs, *, adopting: bool) -> None:
    """Report every ended task, after killing what it leaves behind (its group, adoptees) and
    passing on all it wrote to its log."""
    peek = getattr(os, "waitid", None)
    reaped = False
    while True:
        try:
            if peek is not None:
                # Look before reaping: while the task's leader is a zombie its group id cannot
                # be reused, so the group killed below is the task's own.
                info = peek(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is None:
                    break
                if info.si_pid in tasks:
                    _kill_group(info.si_pid, signal.SIGKILL)
                pid, status = os.waitpid(info.si_pid, 0)
            else:
                ended = _next_exited()
                if ended is None:
                    break
                pid, status = ended
                if pid in tasks:
                    _kill_group(pid, signal.SIGKILL)
        except ChildProcessError:
            break
        reaped = True
        task_id = tasks.pop(pid, None)
        if task_id is not None:
            if adopting:  # before the engine hears of the end, and starts what comes next
                _kill_adopted(tasks)
            logs.ended(pid)
            _report(out, {"id": task_id, "exit": os.waitstatus_to_exitcode(status)})
    if reaped and adopting:
        # A leftover killed here may have had children: they are ours now, and go the same way.
        _kill_adopted(tasks)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _fork(
    payload: dict[str, Any],
    wake: tuple[int, int],
    prctl: Prctl | None,
    logs: TaskLogs,
) -> int:
    """Start the task: open its log, fork; return its pid.

    Raises:
        OSError: The log, the pipe or the process cannot be made.
    """
    server = os.getpid()
    writer, output = logs.open(payload)
    try:
        pid = os.fork()
    except BaseException:
        os.close(writer)
        logs.discard(output)
        raise
    if pid != 0:
        os.close(writer)
        logs.started(pid, output)
        return pid
    # The task. Whatever happens here, it must end in os._exit: returning would run a second
    # fork server in this process.
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in (*wake, output.reader, output.log_fd, *logs.inherited()):
            with contextlib.suppress(OSError):  # the task needs none of them: close what is open
                os.close(fd)
        os.setpgid(0, 0)  # its own group, so the engine can stop the task and its children
        if prctl is not None:
            # Adopt what this task orphans (until it ends, then the server does), and die with
            # the server, so nothing a task starts can outlive the engine.
            prctl(_PR_SET_CHILD_SUBREAPER, 1)
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != server:  # the server died before the line above
                os._exit(1)
        from headwater.executors.launcher import run_task

        run_task(payload, writer)  # never returns
    finally:
        os._exit(1)


def serve() -> None:
    """Serve until stdin closes."""
    # Imported here, once, so every fork starts with them loaded.
    import headwater.executors._preload
    import headwater.executors.launcher  # noqa: F401

    prctl = _load_prctl()
    adopting = prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0
    # Keep the collector off everything loaded so far: a task's GC pass then never writes to
    # (and so never copies) the pages it shares with this server.
    gc.freeze()
    out = sys.stdout
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    tasks: dict[int, int] = {}  # pid -> request id
    runtimes: set[str] = set()  # of tasks run in their images: their containers go with us
    stdin = sys.stdin.buffer
    buffer = bytearray()
    selector = selectors.DefaultSelector()
    selector.register(stdin.fileno(), selectors.EVENT_READ, "requests")
    selector.register(read_fd, selectors.EVENT_READ, "signals")
    logs = TaskLogs(selector)
    _report(out, {"ready": True})
    while True:
        ready = {key.data for key, _ in selector.select()}
        for output in ready - {"requests", "signals"}:
            logs.read(output)
        if "signals" in ready:
            os.read(read_fd, 4096)
            _reap(tasks, out, logs, adopting=adopting)
        if "requests" in ready:
            chunk = os.read(stdin.fileno(), 1 << 20)
            if not chunk:
                break
            scanned = len(buffer)
            buffer += chunk
            while (end := buffer.find(b"\n", scanned)) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                scanned = 0
                request = json.loads(line)
                if "import" in request:  # warm up an optional library once, for every task
                    for module in request["import"]:
                        with contextlib.suppress(ImportError):
                            importlib.import_module(module)
                    continue
                in_image = request["payload"].get("in_image")
                if in_image and in_image.get("runtime"):
                    runtimes.add(in_image["runtime"])
                try:
                    pid = _fork(request["payload"], (read_fd, write_fd), prctl, logs)
                except OSError as exc:  # no log, or no process left to fork (EAGAIN, ENOMEM)
                    detail = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
                    why = f"could not start the task process: {detail or exc}"
                    error = {"error_type": type(exc).__name__, "message": why}
                    _report(out, {"id": request["id"], "error": error})
                    continue
                tasks[pid] = request["id"]
                _report(out, {"id": request["id"], "pid": pid})
        _reap(tasks, out, logs, adopting=adopting)
    selector.unregister(stdin.fileno())
    selector.unregister(read_fd)
    _stop(tasks, logs, adopting=adopting)
    _remove_containers(runtimes)


def _remove_containers(runtimes: set[str]) -> None:
    """Remove what containers our tasks left (a task killed outright cannot remove its own)."""
    if not runtimes:
        return
    from headwater.errors import HeadwaterError
    from headwater.executors import containers

    for runtime in runtimes:
        with contextlib.suppress(HeadwaterError):
            containers.remove(runtime, owner_label=containers.owner())


def _stop(tasks: dict[int, int], logs: TaskLogs, *, adopting: bool, grace: float = 5.0) -> None:
    """Stop every task still running: SIGTERM its group, then SIGKILL what outlives `grace`,
    passing on what they write meanwhile to their logs.

    Then kill whatever the tasks left behind, until this process has no child but the
    services tasks started (which outlive it).
    """
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for pid in tasks:
        _kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while tasks and time.monotonic() < deadline:
        _reap_quietly(tasks, logs)
        logs.wait(0.02)
    for pid in tasks:
        _kill_group(pid, signal.SIGKILL)
    logs.close()
    while True:
        if adopting:
            _kill_adopted({})
            if not tasks and not _leftovers({}):
                return  # nothing left, or only services
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if tasks.pop(pid, None) is not None:
            _kill_group(pid, signal.SIGKILL)


def _reap_quietly(tasks: dict[int, int], logs: TaskLogs) -> None:
    while True:
        try:
            ended = _next_exited()
        except ChildProcessError:
            tasks.clear()
            return
        if ended is None:
            return
        if tasks.pop(ended[0], None) is not None:
            _kill_group(ended[0], signal.SIGKILL)
            logs.ended(ended[0])


if __name__ == "__main__":
    serve()
    # The engine waits for this exit. Finalizing an interpreter with KFP loaded takes a few ms
    # and releases nothing the exit does not: every reply is flushed as it is written.
    os._exit(0)
