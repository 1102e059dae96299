"""A fork server: one warm interpreter with KFP imported that forks a process per task.

Protocol, one JSON object per line: the engine writes `{"id": N, "payload": {...}}` to the
server's stdin; the server forks, the child runs `launcher.run_task(payload)`, and the server
writes `{"id": N, "pid": P}` when it started and `{"id": N, "exit": CODE}` when it ended
(a negative CODE is the signal that killed it). When stdin closes (the engine exited or was
killed), the server terminates its children and exits, so no task outlives its engine.

Run as `python -m headwater.executors.forkserver`; the engine starts it (see `LocalExecutor`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import sys
import time
from typing import Any


def _report(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _reap(children: dict[int, int], out: Any) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        task_id = children.pop(pid, None)
        if task_id is not None:
            _report(out, {"id": task_id, "exit": os.waitstatus_to_exitcode(status)})


def _fork(task_id: int, payload: dict[str, Any], wake: tuple[int, int]) -> int:
    pid = os.fork()
    if pid == 0:  # the task
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in wake:
            os.close(fd)
        os.setpgid(0, 0)  # its own group, so the engine can stop the task and its children
        from headwater.executors.launcher import run_task

        run_task(payload)  # never returns
    return pid


def serve() -> None:
    """Serve until stdin closes."""
    # Imported here, once, so every fork starts with them loaded.
    import headwater.executors._preload
    import headwater.executors.launcher  # noqa: F401

    # Keep the collector off everything loaded so far: a task's GC pass then never writes to
    # (and so never copies) the pages it shares with this server.
    gc.freeze()
    out = sys.stdout
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}
    stdin = sys.stdin.buffer
    buffer = bytearray()
    _report(out, {"ready": True})
    while True:
        readable, _, _ = select.select([stdin, read_fd], [], [])
        if read_fd in readable:
            os.read(read_fd, 4096)
            _reap(children, out)
        if stdin in readable:
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
                pid = _fork(request["id"], request["payload"], (read_fd, write_fd))
                children[pid] = request["id"]
                _report(out, {"id": request["id"], "pid": pid})
        _reap(children, out)
    _stop(children)


def _stop(children: dict[int, int], grace: float = 5.0) -> None:
    """Stop every task still running: SIGTERM its group, then SIGKILL what outlives `grace`."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while children and time.monotonic() < deadline:
        _reap_quietly(children)
        time.sleep(0.02)
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    while children:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        children.pop(pid, None)


def _reap_quietly(children: dict[int, int]) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.pop(pid, None)


if __name__ == "__main__":
    serve()
