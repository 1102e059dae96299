"""`task_counts` (the runs table's cached mark and executor) groups in SQL exactly what the
interface's default counts from `list_executions`."""

from __future__ import annotations

import time

from headwater.metadata import SqlMetadataStore
from headwater.metadata.base import ExecutionRecord, MetadataStore, RunRecord, TaskCounts


def test_counts_states_and_executors_per_run_in_one_query() -> None:
    store = SqlMetadataStore("sqlite://")
    tasks = {
        "mixed": [("SUCCEEDED", "local"), ("SUCCEEDED", "dask"), ("CACHED", None)],
        "hits": [("CACHED", None), ("CACHED", None), ("SKIPPED", None)],
        "none": [],
    }
    for run_id, executions in tasks.items():
        store.create_run(RunRecord(run_id, "p", "v", "RUNNING", created_at=time.time()), ir={})
        for i, (state, executor) in enumerate(executions):
            store.record_execution(ExecutionRecord(run_id, f"t{i}", state, executor=executor))
    asked = [*tasks, "missing"]
    counts = store.task_counts(asked)
    assert counts == {
        "mixed": TaskCounts({"SUCCEEDED": 2, "CACHED": 1}, ["dask", "local"]),
        "hits": TaskCounts({"CACHED": 2, "SKIPPED": 1}, []),
    }
    assert counts == MetadataStore.task_counts(store, asked)
