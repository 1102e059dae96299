"""Is a process still the one we started: its pid alive, not a zombie, and the same start time.

A pid alone is not an identity: after a process exits, the kernel hands its pid to the next
one. A record that keeps a process's start time beside its pid (`process_start`) tells a
reused pid apart; `process_alive` checks both. Linux gives both through `/proc`; elsewhere
only the pid can be checked.
"""

from __future__ import annotations

import os

__all__ = ["process_alive", "process_start"]

# In /proc/<pid>/stat after the command name's closing parenthesis: the state is field 0 and
# the start time (clock ticks since boot) field 19.
_STATE, _START = 0, 19


def process_start(pid: int) -> str:
    """The start time of process `pid` in clock ticks since boot, "" if unknown."""
    fields = _stat(pid)
    return fields[_START].decode() if fields is not None and len(fields) > _START else ""


def process_alive(pid: int, started: str = "") -> bool:
    """True if `pid` is a live process (not a zombie) that started at `started`.

    Args:
        pid: The process id; not positive means no process.
        started: Its start time as `process_start` gave it; "" to check the pid only.

    Returns:
        False if no such process runs, it is a zombie (exited, not yet reaped), or `started`
        is known and differs (the pid now names another process). True if it runs, or
        runs as another user (so cannot be looked at more closely).
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    fields = _stat(pid)
    if fields is None:
        return True  # no /proc to look closer: the signal said it exists
    if not fields or fields[_STATE] in (b"Z", b"X"):
        return False
    return not started or (len(fields) > _START and fields[_START].decode() == started)


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name; None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()
    except OSError:
        return None
