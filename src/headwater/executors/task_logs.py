"""The fork server's side of task logs: each task's stdout and stderr are a pipe the server
reads, appending what comes to the task's log under its size cap (`headwater.logs.CappedLog`).

Nothing but the fork server, which is there anyway, stands between a task and its log: a
task costs a pipe and an open file, not another process. The server opens the log before it
forks (making its directory, and marking where this attempt starts when the log holds an
earlier one's output), reads every task's pipe in its one loop, and reports a task's end only
once it has drained what the task wrote (`ended`): nothing written before a task ended is
lost, even when it called `os._exit` or was killed by a signal. A task's secrets are masked
before they reach the pipe (`headwater.executors.pump`, in the task's process).
"""

from __future__ import annotations

import contextlib
import os
import selectors
from dataclasses import dataclass
from typing import Any

from headwater.logs import AFTER_END_BYTES, CappedLog, open_attempt

_CHUNK = 1 << 16


@dataclass(eq=False)
class TaskOutput:
    """One task's pipe (the end the server reads) and its log."""

    reader: int
    log: CappedLog
    log_fd: int


class TaskLogs:
    """The pipes and logs of the fork server's running tasks, read through `selector`."""

    def __init__(self, selector: selectors.BaseSelector) -> None:
        self._selector = selector
        self._tasks: dict[int, TaskOutput] = {}

    def open(self, payload: dict[str, Any]) -> tuple[int, TaskOutput]:
        """Open the log of a task about to start; return the write end of its pipe (its
        stdout and stderr, for the child) and its output (for `started`).

        Raises:
            OSError: The log or the pipe cannot be made.
        """
        log = open_attempt(
            payload["log_path"], payload.get("attempt", 1), payload.get("log_limit"), inherit=False
        )
        try:
            reader, writer = os.pipe()  # both close on exec; the child dups `writer` to 1, 2
        except BaseException:
            os.close(log.fd)
            raise
        os.set_blocking(reader, False)
        return writer, TaskOutput(reader, log, log.fd)

    def discard(self, output: TaskOutput) -> None:
        """Close what `open` opened for a task that did not start."""
        for fd in (output.reader, output.log_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def started(self, pid: int, output: TaskOutput) -> None:
        """Read the pipe of the task `pid` from now on."""
        self._tasks[pid] = output
        self._selector.register(output.reader, selectors.EVENT_READ, output)

    def inherited(self) -> list[int]:
        """The descriptors a newly forked task must close: the other tasks' pipes and logs."""
        return [fd for out in self._tasks.values() for fd in (out.reader, out.log_fd) if fd >= 0]

    def read(self, output: TaskOutput) -> None:
        """Pass on what is in `output`'s pipe now (a chunk at most, so that no chatty task
        holds up the others or the server); stop reading it when every writer closed it."""
        try:
            chunk = os.read(output.reader, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            output.log.write(chunk)
        else:
            self._selector.unregister(output.reader)
            os.close(output.reader)
            output.reader = -1

    def ended(self, pid: int) -> None:
        """The task `pid` ended: pass on all it wrote (and at most `AFTER_END_BYTES` more from
        processes it left), then close its pipe and log."""
        output = self._tasks.pop(pid, None)
        if output is None:
            return
        passed = 0
        while output.reader >= 0 and passed < AFTER_END_BYTES:
            try:
                chunk = os.read(output.reader, _CHUNK)
            except OSError:  # nothing more now (BlockingIOError), or the pipe is gone
                break
            if not chunk:
                break
            output.log.write(chunk)
            passed += len(chunk)
        if output.reader >= 0:
            self._selector.unregister(output.reader)
        self.discard(output)

    def wait(self, timeout: float) -> None:
        """Pass on what tasks write for up to `timeout` seconds (the server is stopping: its
        selector reads nothing but their pipes)."""
        for key, _ in self._selector.select(timeout):
            self.read(key.data)

    def close(self) -> None:
        """Pass on what every task wrote and close all (the server is stopping)."""
        for pid in list(self._tasks):
            self.ended(pid)
