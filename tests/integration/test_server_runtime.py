"""`headwater server` executing on Dask and installing `packages_to_install`, driven by the
real `kfp.Client` against a real `headwater server` subprocess."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_harness import build_wheel, process_gone, wait_for
from dask_cluster import _QUERY_SCRIPT, DaskCluster
from server_harness import (
    kfp_client,
    running_server,
    start_server,
    stop,
    two_adds,
    wait_state,
    wheel_pipeline,
)

from headwater.api.runs import get_run as headwater_run

pytestmark = pytest.mark.integration

FINAL = ("SUCCEEDED", "FAILED", "SKIPPED", "ERROR", "CANCELED")


def _store(home: Path) -> str:
    return f"sqlite:///{home / 'metadata.db'}"


def _run(client: Any, pipeline: Any) -> Any:
    result = client.create_run_from_pipeline_func(
        pipeline, experiment_name="runtime", enable_caching=False
    )
    return wait_state(client, result.run_id, FINAL, timeout=90)


def _workers(home: Path, run_id: str) -> set[str]:
    """The Dask workers that the run's tasks ran on, as Headwater recorded them."""
    return {str(t.worker) for t in headwater_run(run_id, metadata=_store(home)).tasks}


def _workers_of(address: str) -> dict[str, Any]:
    """The workers registered with the scheduler at `address` (asked from another
    interpreter: distributed never runs in the pytest process)."""
    out = subprocess.run(
        [sys.executable, "-c", _QUERY_SCRIPT, address, "1", "20"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    workers: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return workers


def _descendants(pid: int) -> list[int]:
    """The processes that descend from `pid` now."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


# --- Dask ----------------------------------------------------------------------------------------


def test_runs_go_to_the_given_scheduler(dask_cluster: DaskCluster, tmp_path: Path) -> None:
    home = tmp_path / "home"
    args = ["--executor", "dask", "--scheduler", dask_cluster.address]
    with running_server(home, *args) as base:
        run = _run(kfp_client(base), two_adds)
    assert run.state == "SUCCEEDED", run.error
    workers = _workers(home, run.run_id)
    assert workers and workers <= set(dask_cluster.query()), workers
    assert "started a local Dask cluster" not in (tmp_path / "server.log").read_text()


def test_one_warm_cluster_serves_every_run_and_stops_with_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setenv("HEADWATER_DASK_WORKERS", "2")  # honoured, as by `headwater run`
    home = tmp_path / "home"
    proc, base = start_server(home, "--executor", "dask")
    try:
        client = kfp_client(base)
        first, second = _run(client, two_adds), _run(client, two_adds)
        cluster = _descendants(proc.pid)
        log = (tmp_path / "server.log").read_text()
        assert (first.state, second.state) == ("SUCCEEDED", "SUCCEEDED"), log
        # Started once, at startup; both runs' tasks ran on the workers of that cluster.
        (address,) = re.findall(r"started a local Dask cluster at (tcp://\S+) \(2 workers\)", log)
        workers = _workers(home, first.run_id) | _workers(home, second.run_id)
        cluster_workers = set(_workers_of(address))
        assert len(cluster_workers) == 2 and workers <= cluster_workers, (workers, address)
        assert cluster, "the server has no cluster processes"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0, log
    finally:
        stop(proc)
    wait_for(lambda: all(map(process_gone, cluster)), 10, "the cluster's processes to end")


# --- packages_to_install -------------------------------------------------------------------------


def test_server_runs_install_packages_and_report_pip_failures(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wheel = build_wheel(tmp_path / "wheels", "served-3b9c")
    broken = tmp_path / "bad" / "hwbroken-0.1-py3-none-any.whl"
    broken.parent.mkdir()
    broken.write_bytes(b"not a zip file")
    with running_server(home) as base:
        client = kfp_client(base)
        good = _run(client, wheel_pipeline(str(wheel)))
        bad = _run(client, wheel_pipeline(str(broken)))
    assert good.state == "SUCCEEDED", good.error
    (task,) = headwater_run(good.run_id, metadata=_store(home)).tasks
    value, _, module_file = str(task.outputs["Output"]).partition("@")
    assert value == "served-3b9c"
    # Imported from an environment the server installed, not from the venv.
    assert Path(module_file).is_relative_to(home / "envs"), module_file
    # pip's own output, in the task's log.
    assert "Successfully installed hwtestpkg-0.1" in Path(task.log_path).read_text()

    assert bad.state == "FAILED"
    message = bad.error.message
    assert message.startswith(f"installing {broken} failed: "), message
    assert f"ERROR: Wheel 'hwbroken' located at {broken} is invalid." in message
    # A run that failed before any task is a run everywhere, with the reason.
    recorded = headwater_run(bad.run_id, metadata=_store(home))
    assert recorded.state == "FAILED" and recorded.tasks == []
    assert recorded.error is not None and "hwbroken" in recorded.error["message"]


def test_a_requirement_pip_cannot_read_fails_the_run_with_pips_message(tmp_path: Path) -> None:
    with running_server(tmp_path / "home") as base:
        client = kfp_client(base)
        run = _run(client, wheel_pipeline("hwtestpkg && echo gotcha"))
        again = client.get_run(run.run_id)
    assert run.state == "FAILED" == again.state
    assert "installing hwtestpkg && echo gotcha failed: ERROR: Invalid requirement" in (
        run.error.message
    )
    assert not list((tmp_path / "home" / "envs").glob("[0-9a-f]*"))  # nothing published


def test_no_install_packages_fails_the_run_naming_the_package(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wheel = build_wheel(tmp_path / "wheels", "never-8e21")
    with running_server(home, "--no-install-packages") as base:
        run = _run(kfp_client(base), wheel_pipeline(str(wheel)))
    assert run.state == "FAILED"
    message = run.error.message
    assert "packages_to_install not installed here" in message, message
    assert str(wheel) in message, message
    assert not (home / "envs").exists()


def test_a_killed_servers_cluster_dies_with_it(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    proc, _ = start_server(tmp_path / "home", "--executor", "dask")
    try:
        assert "started a local Dask cluster" in (tmp_path / "server.log").read_text()
        cluster = _descendants(proc.pid)
        assert cluster, "the server has no cluster processes"
        proc.kill()
        proc.wait()
        wait_for(lambda: all(map(process_gone, cluster)), 15, "the cluster's processes to end")
    finally:
        stop(proc)
