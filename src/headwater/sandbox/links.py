"""Links a sandboxed task leaves that point outside what it may see, removed before anyone
outside its sandbox follows them.

Inside its sandbox a task can make a link to any path (`/etc/shadow`,
`$HEADWATER_HOME/token`): there it reaches nothing, but the engine, the server and the
task's next attempt, which read and write the task's folders with the server's rights, would
follow it there (an output parameter file, a log, an artifact downloaded through the UI, the
`executor_input.json` of a retry). So the task's supervisor removes every link under the
task's folder and output folders that resolves outside the task's own paths (its writable
ones and its inputs), once its sandbox has ended, and again before its next attempt begins;
each one removed is said in the task's log. (The run's workspace, shared by its tasks, is
read by nothing outside their sandboxes, and is not walked.)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Sequence

__all__ = ["remove_escapes"]


def remove_escapes(roots: Sequence[str], allowed: Iterable[str]) -> list[str]:
    """Remove each link under `roots` that resolves outside `allowed`; the links removed.

    A root that is itself a link is removed too (the task's folders are made by the engine:
    a link there was put by a task).
    """
    inside = [os.path.realpath(a) for a in allowed]
    removed = []
    for root in roots:
        if os.path.islink(root):
            removed += _unlink(root)
            continue
        for folder, dirs, files in os.walk(root):  # links to folders are listed, not entered
            for name in (*dirs, *files):
                path = os.path.join(folder, name)
                if os.path.islink(path) and not _within(os.path.realpath(path), inside):
                    removed += _unlink(path)
    for path in removed:
        print(f"headwater: removed {path}: a link out of the task's own paths", file=sys.stderr)
    return removed


def _unlink(path: str) -> list[str]:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        return [path]
    return []


def _within(path: str, folders: Sequence[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)
