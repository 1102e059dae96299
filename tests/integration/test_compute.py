"""`headwater.compute`: a component's Dask client is the run's cluster, or a local one.

Dask runs only in subprocesses here (pytest turns warnings into errors; distributed warns).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_harness import Cli, pipeline, run_ok
from dask_cluster import DaskCluster

pytestmark = pytest.mark.integration


def test_a_component_computes_on_the_runs_own_cluster(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    cli = headwater(
        "run",
        pipeline("compute_client"),
        "--param",
        "n=1000",
        "--executor",
        "dask",
        "--scheduler",
        dask_cluster.address,
        "--json",
        timeout=120,
    )
    output = run_ok(cli)["outputs"]["Output"]
    # The sum is right, and it was computed through the scheduler the run was given.
    assert output == f"499500 via {dask_cluster.address} env={dask_cluster.address}"


def test_a_component_outside_a_dask_run_starts_a_local_cluster(headwater: Cli) -> None:
    cli = headwater("run", pipeline("compute_client"), "--param", "n=100", "--json", timeout=120)
    output = run_ok(cli)["outputs"]["Output"]
    total, _, rest = output.partition(" via ")
    assert total == "4950"
    assert rest.startswith("tcp://127.0.0.1:") and rest.endswith(" env="), output


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter outside any Dask run (no scheduler handed to it)."""
    env = {k: v for k, v in env.items() if k != "HEADWATER_DASK_SCHEDULER"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_settings_come_from_the_environment_and_spill_where_asked(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    env = {
        **os.environ,
        "HEADWATER_DASK_WORKERS": "2",
        "HEADWATER_DASK_MEMORY_LIMIT": "600MB",
        "HEADWATER_DASK_SPILL_DIR": str(spill),
    }
    code = """
        import json
        from headwater.compute import get_client
        client = get_client()
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        dirs = client.run(lambda dask_worker: dask_worker.local_directory)
        print(json.dumps({
            "limits": sorted(w["memory_limit"] for w in workers),
            "dirs": sorted(dirs.values()),
            "same": get_client() is client,
        }))
    """
    proc = _python(code, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert shown["limits"] == [600_000_000, 600_000_000]
    assert all(d.startswith(str(spill)) for d in shown["dirs"]), shown["dirs"]
    assert shown["same"] is True  # one cluster per process


def test_cluster_is_closed_after_the_block(tmp_path: Path) -> None:
    code = """
        from headwater.compute import cluster
        with cluster(n_workers=1, memory_limit="500MB") as client:
            assert client.submit(sum, [1, 2, 3]).result() == 6
            address = client.scheduler.address
        print(client.status)
    """
    proc = _python(code, dict(os.environ), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "closed"


def test_a_bad_setting_is_one_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "HEADWATER_DASK_WORKERS": "many"}
    code = """
        from headwater.compute import get_client
        from headwater.errors import UserError
        try:
            get_client()
        except UserError as exc:
            print("refused:", exc)
    """
    proc = _python(code, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "refused: HEADWATER_DASK_WORKERS='many' is not a valid int" in proc.stdout
