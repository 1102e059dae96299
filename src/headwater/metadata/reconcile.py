"""Finding runs whose engine died (SIGKILL, power loss) and marking them INTERRUPTED."""

from __future__ import annotations

import os
import socket
import time

from headwater.metadata.base import MetadataStore


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed engine whose parent has not reaped it yet still answers kill(0): a zombie.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def mark_dead_runs(store: MetadataStore) -> list[str]:
    """Mark RUNNING runs whose engine process on this host is gone; return their ids.

    Runs started on another host are left alone: only that host can tell whether its engine
    still lives.
    """
    host = socket.gethostname()
    marked = []
    for run in store.running_runs():
        if run.engine_host == host and run.engine_pid != os.getpid() and not _alive(run.engine_pid):
            store.mark_interrupted(run.run_id, finished_at=time.time())
            marked.append(run.run_id)
    return marked
