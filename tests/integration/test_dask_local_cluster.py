"""`--executor dask` with no scheduler: a LocalCluster made for the run, and closed after it."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_a_script_without_a_main_guard_gets_one_clear_error(tmp_path: Path) -> None:
    """Dask's spawned workers import the calling script again: say so, not 'Nanny failed'."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import headwater\n"
        "from headwater.errors import UserError\n"
        "try:\n"
        f"    headwater.run({pipeline('compute_client')!r}, executor='dask')\n"
        "except UserError as exc:\n"
        "    print('refused:', exc)\n"
    )
    env = {**os.environ, "HEADWATER_HOME": str(tmp_path / "home")}
    env.pop("HEADWATER_DASK_SCHEDULER", None)
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    refused = [line for line in proc.stdout.splitlines() if line.startswith("refused:")]
    assert refused, proc.stdout + proc.stderr
    assert 'if __name__ == "__main__":' in refused[-1]
