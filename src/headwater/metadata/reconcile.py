"""Runs whose engine died (SIGKILL, power loss): seen as INTERRUPTED, and marked so by writers.

A RUNNING run whose engine process on this host is gone is INTERRUPTED, whatever the store
still says. Readers (`runs list`, `runs show`, `lineage`, the web UI) present it so with
`presented_run` / `presented_execution` and write nothing; the next writer (a run or a resume)
makes it durable with `mark_dead_runs`.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

from headwater.metadata.base import (
    ACTIVE_RUN_STATES,
    ExecutionRecord,
    MetadataStore,
    RunRecord,
)
from headwater.processes import process_alive

#: The error recorded on a task that was RUNNING when its engine died.
INTERRUPTED_TASK_ERROR: dict[str, Any] = {
    "error_type": "Interrupted",
    "message": "the engine stopped before the task finished",
}


def engine_dead(run: RunRecord) -> bool:
    """True if an engine holds `run` (RUNNING or CANCELING) but that process on this host
    is gone: no process has its pid, or the one that has started at another time.

    Runs started on another host are taken as alive: only that host can tell.
    """
    return (
        run.state in ACTIVE_RUN_STATES
        and run.engine_host == socket.gethostname()
        and run.engine_pid != os.getpid()
        and not process_alive(run.engine_pid, run.engine_started)
    )


def presented_run(run: RunRecord) -> RunRecord:
    """`run` as a reader shows it: INTERRUPTED (CANCELED if it was being canceled) if its
    engine died, else unchanged."""
    if not engine_dead(run):
        return run
    return dataclasses.replace(run, state="CANCELED" if run.state == "CANCELING" else "INTERRUPTED")


def presented_execution(execution: ExecutionRecord, run: RunRecord) -> ExecutionRecord:
    """A task of `run` as a reader shows it: if the run's engine died (`run` as stored, or
    already presented INTERRUPTED) a RUNNING task is FAILED with `INTERRUPTED_TASK_ERROR`,
    as `mark_interrupted` will record it."""
    if execution.state != "RUNNING" or run.state not in (*ACTIVE_RUN_STATES, "INTERRUPTED"):
        return execution
    if run.state in ACTIVE_RUN_STATES and not engine_dead(run):
        return execution
    return dataclasses.replace(execution, state="FAILED", error=dict(INTERRUPTED_TASK_ERROR))


def mark_dead_runs(store: MetadataStore) -> list[str]:
    """Mark RUNNING runs whose engine process on this host is gone; return their ids.

    Only writers call this (a run, a resume, deleting a run): reading must not write.
    """
    marked = []
    for run in store.running_runs():
        if engine_dead(run):
            # Only if that dead engine still holds it: another may have claimed it meanwhile.
            store.mark_interrupted(
                run.run_id,
                finished_at=time.time(),
                engine_host=run.engine_host,
                engine_pid=run.engine_pid,
            )
            marked.append(run.run_id)
    return marked
