"""`--executor dask` with no scheduler: a LocalCluster made for the run, and closed after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_harness import Cli, pipeline, run_ok

pytestmark = pytest.mark.integration


def test_a_local_cluster_runs_the_pipeline_and_leaves_retries_to_the_task(
    headwater: Cli, tmp_path: Path
) -> None:
    """The task's first attempt SIGKILLs its own worker: Dask must not re-run it silently
    (the cluster is made with allowed-failures 0); the task's retry policy runs attempt 2."""
    marker = tmp_path / "first-attempt-ran"
    cli = headwater(
        "run",
        pipeline("dask_kill_own_worker"),
        "--param",
        f"marker={marker}",
        "--executor",
        "dask",
        "--json",
        timeout=120,
    )
    result = run_ok(cli)
    assert result["outputs"] == {"Output": "second attempt"}
    assert "running on a local Dask cluster" in cli.stderr
    (task,) = result["tasks"]
    assert task["executor"] == "dask"
    assert task["worker"].startswith("tcp://127.0.0.1:")
    shown = headwater("runs", "show", result["run_id"], "--json").json()
    (recorded,) = shown["tasks"]
    assert recorded["attempts"] == 2
    assert recorded["executor"] == "dask"
