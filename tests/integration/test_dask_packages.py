"""`packages_to_install` under `--executor dask`: resolved on the worker that runs the task."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_harness import Cli, build_wheel, pipeline, run_failed, run_ok, task_states
from dask_cluster import DaskCluster

pytestmark = pytest.mark.integration


def _on(cluster: DaskCluster) -> list[str]:
    return ["--executor", "dask", "--scheduler", cluster.address]


def test_a_package_missing_on_the_worker_fails_that_task_naming_it(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    cli = headwater("run", pipeline("runtime_missing_pkg"), "--json", *_on(dask_cluster))
    result = run_failed(cli)
    assert task_states(result) == {"needs-missing": "FAILED", "plain": "SUCCEEDED"}
    (failed,) = [t for t in result["tasks"] if t["state"] == "FAILED"]
    message = failed["error"]["message"]
    assert "headwater-no-such-pkg-xyz==1.0" in message
    assert "--install-packages" in message
    # Resolved where it ran: the message names the worker (one listens on 127.0.0.2).
    assert re.search(r"on tcp://127\.0\.0\.[12]:[0-9]+: ", message), message
    assert failed["error"]["error_type"] == "MissingPackagesError"


def test_install_packages_installs_on_the_worker_once(
    headwater: Cli,
    dask_cluster: DaskCluster,
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path / "wheels", "from-a-worker-5d1e")
    headwater.env["HEADWATER_TEST_WHEEL"] = str(wheel)
    args = ["run", pipeline("runtime_wheel_pkg"), "--json", "--install-packages"]
    first = run_ok(headwater(*args, *_on(dask_cluster)))
    value, _, module_file = first["outputs"]["Output"].partition("@")
    assert value == "from-a-worker-5d1e"
    # Installed into the worker's own HEADWATER_HOME (each worker runs in its own directory),
    # not the engine's.
    worker_homes = [w.cwd / "headwater-home" for w in dask_cluster.workers]
    assert any(Path(module_file).is_relative_to(home / "envs") for home in worker_homes), (
        module_file
    )
    assert not (headwater.home / "envs").exists()
