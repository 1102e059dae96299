"""`job.launch`, the PyTorchJob equivalent, with real replica processes that rendezvous over gloo:
on this machine, and on a real Dask cluster on loopback (`dask scheduler`, two one-thread
`dask worker`s).

Local jobs run in this process. Dask jobs run `launch` in a subprocess whose environment has
HEADWATER_DASK_SCHEDULER, as every task under `--executor dask` has (and, for a task on a
worker, HEADWATER_DASK_WORKER), so distributed never runs in the pytest process. The targets
are a file target, pipelines/torch_targets.py, which travels to the workers as user code does.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import PIPELINES, process_gone, wait_for
from dask_cluster import DaskCluster, WorkerSpec, start_cluster

from headwater.components.torch.job import launch
from headwater.errors import InvalidArgumentError, UserError

pytest.importorskip("torch")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TARGETS = str(PIPELINES / "torch_targets.py")
#: How soon a failed replica must fail the job (gloo would wait 30 minutes on a dead peer).
FAIL_WITHIN_S = 10


def _pids(pid_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(pid_dir.glob("pid-*"))]


def _since_the_failure(pid_dir: Path) -> float:
    """Seconds since `fail_on_rank_one`'s rank 1 raised (the replicas' start, slow on a loaded
    machine, is not part of what the bound is about)."""
    return time.time() - float((pid_dir / "failed-at").read_text())


def test_local_replicas_rendezvous_and_all_reduce() -> None:
    lines: list[str] = []
    result = launch(f"{TARGETS}:rendezvous", {}, 2, threads_per_replica=1, log=lines.append)
    assert result["sum"] == 1
    seen = [r["env"] for r in result["replicas"]]
    assert [e["RANK"] for e in seen] == ["0", "1"]
    assert {(e["MASTER_ADDR"], e["WORLD_SIZE"], e["OMP_NUM_THREADS"]) for e in seen} == {
        ("127.0.0.1", "2", "1")
    }
    assert len({e["MASTER_PORT"] for e in seen}) == 1
    assert {"[rank 0] rank 0 of 2 joined", "[rank 1] rank 1 of 2 joined"} <= set(lines)


def test_local_failure_stops_the_other_replicas(tmp_path: Path) -> None:
    lines: list[str] = []
    with pytest.raises(UserError) as caught:
        launch(
            f"{TARGETS}:fail_on_rank_one",
            {"pid_dir": str(tmp_path)},
            2,
            threads_per_replica=1,
            log=lines.append,
        )
    assert _since_the_failure(tmp_path) < FAIL_WITHIN_S
    assert str(caught.value) == (
        "replica 1 of 2 failed (exit 1): ValueError: boom; the other replicas were stopped"
    )
    assert "[rank 1] ValueError: boom" in lines
    pids = _pids(tmp_path)
    assert len(pids) == 2
    assert all(process_gone(pid) for pid in pids), pids


def test_a_target_in_a_kfp_artifact_file_without_py(tmp_path: Path) -> None:
    code = tmp_path / "code"  # as an Output[Artifact] path is named
    code.write_text(Path(TARGETS).read_text())
    found = launch(f"{code}:echo", {"n": 3}, 1, log=lambda line: None)
    assert found == {"kwargs": {"n": 3}, "rank": "0", "world": "1"}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_replicas_do_not_outlive_an_interrupted_launcher(
    tmp_path: Path, sig: signal.Signals
) -> None:
    script = (
        "from headwater.components.torch.job import launch\n"
        f"launch({TARGETS + ':sleep'!r}, {{'pid_dir': {str(tmp_path)!r}}}, 2)\n"
    )
    with (tmp_path / "launcher.log").open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=out, stderr=out)
    try:
        wait_for(lambda: len(_pids(tmp_path)) == 2, 30, "both replicas to start")
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == -sig, (tmp_path / "launcher.log").read_text()
        pids = _pids(tmp_path)
        if sig == signal.SIGTERM:  # the launcher stopped them before it went
            assert all(process_gone(pid) for pid in pids), pids
        else:  # each replica sees its parent gone, and goes too
            wait_for(lambda: all(process_gone(pid) for pid in pids), 5, "orphans to end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("replicas", [0, -1, 1.5, True], ids=["zero", "negative", "float", "bool"])
def test_replicas_below_one_are_refused(replicas: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"replicas must be a whole number >= 1"):
        launch(f"{TARGETS}:sleep", {}, replicas)


# Dask ----------------------------------------------------------------------------------------

# Run in a fresh interpreter, as a task would: `prelude`, launch, `epilogue`; print the result
# (or the error) and this process's pid as the last line.
_LAUNCHER = """
import json, os, sys, time
args = json.loads(sys.argv[1])
exec(args["prelude"])
from headwater.components.torch.job import launch
from headwater.errors import UserError
try:
    found = {"result": launch(*args["call"], **args["options"])}
except UserError as exc:
    found = {"error": type(exc).__name__, "message": str(exc)}
finally:
    exec(args["epilogue"])
print(json.dumps({**found, "pid": os.getpid()}))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    """A scheduler and two one-thread workers for this module's tests."""
    pytest.importorskip("distributed")
    workers = [WorkerSpec("worker-a", nthreads=1), WorkerSpec("worker-b", nthreads=1)]
    made = start_cluster(tmp_path_factory.mktemp("torch-job"), workers)
    try:
        yield made
    finally:
        made.stop()


def launch_as_task(
    cluster: DaskCluster,
    call: list[Any],
    *,
    cwd: Path,
    own_worker: str | None = None,
    prelude: str = "",
    epilogue: str = "",
    **options: Any,
) -> tuple[dict[str, Any], str]:
    """`launch(*call, **options)` in a process with the run's scheduler in its environment
    (and `own_worker` as its worker); the printed outcome, and all it wrote."""
    env = {**cluster.env, "HEADWATER_DASK_SCHEDULER": cluster.address}
    if own_worker:
        env["HEADWATER_DASK_WORKER"] = own_worker
    args = json.dumps({"call": call, "options": options, "prelude": prelude, "epilogue": epilogue})
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr + cluster.logs()
    outcome: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return outcome, proc.stdout


@pytest.mark.parametrize("inside", [False, True], ids=["outside-the-cluster", "task-on-worker-a"])
def test_dask_replicas_rendezvous_on_distinct_workers_with_their_files(
    cluster: DaskCluster, tmp_path: Path, inside: bool
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("seven\n")
    workers = cluster.query()
    by_name = {w["name"]: a for a, w in workers.items()}
    own = by_name["worker-a"] if inside else None
    outcome, printed = launch_as_task(
        cluster,
        [f"{TARGETS}:rendezvous", {"path": "data/input.txt"}, 2],
        cwd=tmp_path,
        own_worker=own,
        files=["data"],
    )
    result = outcome["result"]
    assert result["sum"] == 1, outcome
    seen = result["replicas"]
    assert [r["text"] for r in seen] == ["seven\n", "seven\n"]
    assert [r["env"]["RANK"] for r in seen] == ["0", "1"]
    assert {r["env"]["MASTER_ADDR"] for r in seen} == {"127.0.0.1"}
    assert {r["env"]["OMP_NUM_THREADS"] for r in seen} == {"1"}  # the worker's one thread
    worker_pids = {w["pid"]: a for a, w in workers.items()}
    if inside:  # rank 0 is the task's own child, on its worker, and reads the original
        assert seen[0]["ppid"] == outcome["pid"] and seen[0]["path"] == "data/input.txt"
        assert worker_pids[seen[1]["ppid"]] == by_name["worker-b"]
    else:
        assert {worker_pids[r["ppid"]] for r in seen} == set(workers)
    for replica in seen[1:] if inside else seen:  # a copy in the worker's scratch space
        assert replica["path"].endswith("/data/input.txt") and "dask-scratch" in replica["path"]
    assert "[rank 1] rank 1 of 2 joined" in printed.splitlines()


@pytest.mark.parametrize(
    ("resources", "needs"),
    [
        (None, "pytorch_job needs 3 workers, one per replica; the cluster has 2 (tcp://"),
        ({"GPU": 1}, "pytorch_job needs 3 workers with {'GPU': 1} each; the cluster has 0 such"),
    ],
    ids=["plain", "accelerators"],
)
def test_dask_job_larger_than_the_cluster_starts_nothing(
    cluster: DaskCluster, tmp_path: Path, resources: dict[str, float] | None, needs: str
) -> None:
    outcome, _ = launch_as_task(
        cluster,
        [f"{TARGETS}:sleep", {"pid_dir": str(tmp_path)}, 3],
        cwd=tmp_path,
        resources=resources,
    )
    assert outcome["error"] == "ResourceError", outcome
    assert outcome["message"].startswith(needs), outcome
    assert not _pids(tmp_path)


def test_dask_failure_stops_the_other_replicas(cluster: DaskCluster, tmp_path: Path) -> None:
    outcome, printed = launch_as_task(
        cluster, [f"{TARGETS}:fail_on_rank_one", {"pid_dir": str(tmp_path)}, 2], cwd=tmp_path
    )
    assert _since_the_failure(tmp_path) < FAIL_WITHIN_S
    assert outcome["error"] == "UserError", outcome
    assert outcome["message"].startswith("replica 1 of 2 on tcp://127.0.0.1:"), outcome
    assert outcome["message"].endswith(
        "failed (exit 1): ValueError: boom; the other replicas were stopped"
    )
    assert "[rank 1] ValueError: boom" in printed.splitlines()
    pids = _pids(tmp_path)
    assert len(pids) == 2
    assert all(process_gone(pid) for pid in pids), pids


def test_dask_replicas_that_cannot_start_stop_the_job(cluster: DaskCluster, tmp_path: Path) -> None:
    workers = {w["name"]: a for a, w in cluster.query().items()}
    # Worker b's only thread is taken by another task until the launch is over.
    prelude = textwrap.dedent(
        f"""
        from distributed import Client, Event
        blocker_client = Client({cluster.address!r})
        release = Event({f"release-{tmp_path.name}"!r}, client=blocker_client)
        def hold():
            Event({f"release-{tmp_path.name}"!r}).wait(60)
        blocker = blocker_client.submit(hold, workers=[{workers["worker-b"]!r}], pure=False)
        while not blocker_client.processing().get({workers["worker-b"]!r}):
            time.sleep(0.05)
        """
    )
    outcome, _ = launch_as_task(
        cluster,
        [f"{TARGETS}:sleep", {"pid_dir": str(tmp_path)}, 2],
        cwd=tmp_path,
        own_worker=workers["worker-a"],
        prelude=prelude,
        epilogue="release.set(); blocker.result(); release.clear()",
        start_timeout_s=2,
    )
    assert outcome["error"] == "ResourceError", outcome
    assert outcome["message"].startswith(
        f"replica 1 of 2 did not start within 2 s: rank 1 on {workers['worker-b']} (1 other "
        "task(s) running there)"
    ), outcome
    pids = _pids(tmp_path)
    assert len(pids) == 1  # rank 0, which started here, and was stopped
    assert all(process_gone(pid) for pid in pids), pids
