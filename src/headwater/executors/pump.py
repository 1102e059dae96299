"""In the task process: its output through a pump that masks secret values before the log.

`mask_output` splits the task process in two. The child returns and runs the task as before,
except that its stdout and stderr (file descriptors 1 and 2, so whatever writes there: the
component, a library, a subprocess, a program it execs) are a pipe. The parent becomes the
pump: it reads the pipe, masks each chunk (`headwater.platform.masking.StreamMasker`) and
passes the result on (to the fork server, which keeps the log), until the child ends; then it
exits as the child did (its code, or the signal that killed it).

The pump, not the child, is what the fork server knows as the task, so the task's end is seen
only once the log holds all of its output: nothing written before the task ended is lost, even
when the component calls `os._exit` or is killed by a signal. The pump ignores SIGTERM and
SIGINT, which stop the task's group, so that it can pass on what the child wrote before it
died. Tasks that use no secret have no pump and no extra process.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from typing import NoReturn

from headwater.logs import AFTER_END_BYTES
from headwater.platform.masking import Masker, StreamMasker

_PR_SET_PDEATHSIG = 1
_CHUNK = 1 << 16


def mask_output(masker: Masker) -> None:
    """Put a masking pump between this process's stdout/stderr and where they go now.

    Returns in the child, which runs the task; the parent pumps and never returns.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    source, sink = os.pipe()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    # Installed before the fork, so a child that ends at once still wakes the pump.
    signal.signal(signal.SIGCHLD, _ignore)
    signal.set_wakeup_fd(wake_write)
    alarm = signal.alarm(0)  # kubernetes.set_timeout: the child's deadline, not the pump's
    pump = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with(pump)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (source, wake_read, wake_write):
            os.close(fd)
        os.dup2(sink, 1)
        os.dup2(sink, 2)
        os.close(sink)
        if alarm:
            signal.alarm(alarm)
        return
    try:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.close(sink)
        status = _pump(source, wake_read, pid, masker.stream())
    except BaseException:
        os._exit(1)
    _exit_as(status)


def _die_with(parent: int) -> None:
    """Be killed when `parent` dies, as the task was with the fork server (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _ignore(signum: int, frame: object) -> None:
    """A SIGCHLD handler that does nothing: its wakeup byte is what the pump waits for."""


def _pump(source: int, wake: int, child: int, stream: StreamMasker) -> int:
    """Pass masked output on to fd 1 until `child` has ended; return its wait status."""
    status = None
    watching = [wake, source]
    while status is None:
        ready, _, _ = select.select(watching, [], [])
        if source in ready:
            chunk = os.read(source, _CHUNK)
            if chunk:
                _write(stream.feed(chunk))
            else:  # every writer closed it; the child may still run
                watching.remove(source)
        if wake in ready:
            os.read(wake, 512)
            status = _reap(child)
    if source in watching:
        os.set_blocking(source, False)
        passed = 0
        while passed < AFTER_END_BYTES:
            try:
                chunk = os.read(source, _CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                break
            passed += len(chunk)
            _write(stream.feed(chunk))
    _write(stream.close())
    return status


def _reap(child: int) -> int | None:
    """Reap every ended child (orphans the task left are ours too); the task's wait status,
    or None while it runs."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == child:
            found = status


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(1, view) :]
        except OSError:
            return  # the log is gone: nowhere left to write


def _exit_as(status: int) -> NoReturn:
    """End this process as the wait `status` says the child ended."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL keeps its default anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal that does not end a process (never, from a wait status)
    os._exit(code)
