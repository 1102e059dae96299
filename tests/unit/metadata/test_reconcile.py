"""Runs whose engine died are marked INTERRUPTED; live or foreign engines are left alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from headwater.metadata import SqlMetadataStore
from headwater.metadata.base import ExecutionRecord, RunRecord
from headwater.metadata.reconcile import mark_dead_runs


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def add_run(store: SqlMetadataStore, run_id: str, *, host: str, pid: int) -> None:
    record = RunRecord(
        run_id, "p", "v1", "RUNNING", created_at=time.time(), engine_host=host, engine_pid=pid
    )
    store.create_run(record, ir={})
    store.record_execution(ExecutionRecord(run_id=run_id, task="work", state="RUNNING"))


def test_dead_local_engine_is_interrupted_and_its_tasks_failed() -> None:
    store = SqlMetadataStore("sqlite://")
    add_run(store, "dead", host=socket.gethostname(), pid=dead_pid())
    add_run(store, "alive", host=socket.gethostname(), pid=os.getppid())
    add_run(store, "elsewhere", host="another-host", pid=dead_pid())

    assert mark_dead_runs(store) == ["dead"]

    states = {r.run_id: r.state for r in store.list_runs()}
    assert states == {"dead": "INTERRUPTED", "alive": "RUNNING", "elsewhere": "RUNNING"}
    [work] = store.list_executions("dead")
    assert work.state == "FAILED"
    assert work.error is not None and work.error["error_type"] == "Interrupted"


def test_a_live_pid_that_started_at_another_time_is_not_the_engine() -> None:
    """The pid of a dead engine, reused by another process: the recorded start time tells
    them apart, so the run is still found dead."""
    from headwater.processes import process_start

    store = SqlMetadataStore("sqlite://")
    here, pid = socket.gethostname(), os.getppid()  # a live process: the test runner's parent
    for run_id, started in (("same", process_start(pid)), ("reused", "1")):
        record = RunRecord(
            run_id, "p", "v1", "RUNNING", created_at=time.time(), engine_host=here,
            engine_pid=pid, engine_started=started,
        )  # fmt: skip
        store.create_run(record, ir={})
    assert mark_dead_runs(store) == ["reused"]
    assert {r.run_id: r.state for r in store.list_runs()} == {
        "same": "RUNNING",
        "reused": "INTERRUPTED",
    }
