"""The Dask executor against a real cluster on loopback: `dask scheduler` and `dask worker`.

Every run is the real CLI in a subprocess with `--executor dask --scheduler ADDRESS`. Tests
that only run pipelines share one cluster per session (`dask_cluster`); those that need
special workers, or kill a worker or the scheduler, start their own (`dask_cluster_factory`).
The same IR features on both executors are in test_ir_features.py. Waits poll.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import (
    Cli,
    CliResult,
    cached_flags,
    kill_leftovers,
    one_line,
    pipeline,
    process_gone,
    run_failed,
    run_ok,
    task_states,
    wait_for,
)
from dask_cluster import (
    DaskCluster,
    StartCluster,
    WorkerSpec,
    worker_of,
)
from s3_server import S3Server

pytestmark = [pytest.mark.integration, pytest.mark.slow]
pytest.importorskip("distributed")

#: Longest a run may take to end after its scheduler is lost, and a bad scheduler to be told.
SCHEDULER_LOST_S = 10
#: Longest a task may outlive its SIGKILLed engine: about 1 s on an idle machine (the lease
#: lapses as the engine's connection closes, the worker looks every second); the bug it pins
#: left the task running for good.
ENGINE_KILLED_S = 6
UNREACHABLE_S = 5
#: What `headwater run --executor dask` takes to start, import Dask and be refused by a closed
#: port on an idle 2-core machine (measured 1.2 s; the same 0.5 s of margin as before).
IDLE_DASK_REFUSED_S = 1.7


def on(cluster: DaskCluster) -> list[str]:
    """The `run` arguments that choose the Dask executor on `cluster`."""
    return ["--executor", "dask", "--scheduler", cluster.address]


def tasks_by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    task_states(result)  # asserts each task is listed once
    return {task["name"]: task for task in result["tasks"]}


def assert_ran_on(tasks: dict[str, dict[str, Any]], workers: set[str]) -> None:
    """Every task that was not a cache hit ran on the Dask executor, on one of `workers`."""
    for name, task in tasks.items():
        if task["cached"]:
            assert task["worker"] is None, (name, task)
            continue
        assert task["executor"] == "dask", (name, task)
        assert task["worker"] in workers, (name, task, workers)


def log_text(task: dict[str, Any]) -> str:
    """The log of a task as `runs show --json` points at it (a local path or file:// URI)."""
    where = task.get("log_uri") or task.get("log_path")
    assert where, f"no log location in {task}"
    return Path(str(where).removeprefix("file://")).read_text()


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """Where tasks record pids and attempts (workers run on this host, so they see it)."""
    path = tmp_path / "scratch"
    path.mkdir()
    return path


@contextlib.contextmanager
def started(
    headwater: Cli, tmp_path: Path, *args: str
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`headwater run ARGS --json` in the background (stdout/stderr to files); killed after."""
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = headwater.popen("run", *args, "--json", stdout=stdout, stderr=stderr)
    try:
        yield proc, tmp_path
    finally:
        kill_leftovers(proc)


def finished(proc: subprocess.Popen[str], where: Path, timeout: float) -> CliResult:
    """Wait for a process from `started`; its result."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"the run did not end within {timeout}s\nstderr:\n" + (where / "stderr.txt").read_text()
        )
    stdout = (where / "stdout.txt").read_text()
    return CliResult.of(proc.returncode, stdout, (where / "stderr.txt").read_text())


# --- where tasks run, and what the run records -----------------------------------------------


def test_every_task_records_its_executor_and_worker(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    workers = set(dask_cluster.query())

    result = run_ok(headwater.run("params_chain", *on(dask_cluster)))

    assert_ran_on(tasks_by_name(result), workers)
    shown = headwater.show(result["run_id"])
    assert_ran_on(tasks_by_name(shown), workers)
    assert {t["attempts"] for t in shown["tasks"]} == {1}
    # run.json, the run's own record, says the same.
    recorded = json.loads((headwater.home / "runs" / result["run_id"] / "run.json").read_text())
    assert_ran_on(tasks_by_name(recorded), workers)

    again = run_ok(headwater.run("params_chain", *on(dask_cluster)))
    assert all(cached_flags(again).values()), again
    assert_ran_on(tasks_by_name(again), workers)


def test_s3_root_passes_artifacts_between_tasks_on_workers(
    headwater: Cli,
    s3_env: S3Server,
    s3_bucket: str,
    dask_cluster_factory: StartCluster,
) -> None:
    # Workers get the same AWS settings as the engine, from their own environment.
    cluster = dask_cluster_factory(env=os.environ)
    headwater.env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    root = f"s3://{s3_bucket}/root"
    args = ["--pipeline-root", root, *on(cluster)]

    result = run_ok(headwater.run("storage_s3", *args))

    assert result["outputs"] == {"Output": "RIVER DATA"}
    assert_ran_on(tasks_by_name(result), set(cluster.query()))
    key = f"root/storage-s3/{result['run_id']}/produce/data"
    with contextlib.closing(s3_env.client()) as client:
        assert client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == b"river data"
    shown = tasks_by_name(headwater.show(result["run_id"]))
    assert shown["consume"]["artifacts"]["inputs"]["data"] == [f"s3://{s3_bucket}/{key}"]
    assert_ran_on(shown, set(cluster.query()))

    again = run_ok(headwater.run("storage_s3", *args))
    assert cached_flags(again) == {"produce": True, "consume": True}
    assert again["outputs"] == {"Output": "RIVER DATA"}


def test_python_api_takes_an_address_or_a_client(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        import headwater
        from distributed import Client
        path, address = sys.argv[1:3]
        by_address = headwater.run(path, {"text": "api"}, executor="dask", scheduler=address)
        with Client(address) as client:
            by_client = headwater.run(path, {"text": "api"}, executor="dask", scheduler=client,
                                      enable_cache=False)
            still_open = client.status
        print(json.dumps({
            "runs": [
                {"state": r.state, "outputs": r.outputs,
                 "tasks": [[t.name, t.executor, t.worker] for t in r.tasks]}
                for r in (by_address, by_client)
            ],
            "client": still_open,
        }))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, pipeline("storage_s3"), dask_cluster.address],
        capture_output=True,
        text=True,
        env=headwater.env,
        cwd=headwater.cwd,
        timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    workers = set(dask_cluster.query())
    for run in report["runs"]:
        assert run["state"] == "SUCCEEDED", run
        assert run["outputs"] == {"Output": "API"}
        for name, executor, worker in run["tasks"]:
            assert executor == "dask" and worker in workers, (name, executor, worker)
    # A Client the caller passed in is the caller's: the run leaves it open.
    assert report["client"] == "running"


def test_workers_on_any_loopback_address_may_use_a_local_root(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    """127.0.0.2 is this machine too: a local pipeline root is accepted, and the run works."""
    workers = set(dask_cluster.query())
    assert any(a.startswith("tcp://127.0.0.2:") for a in workers), workers

    result = run_ok(headwater.run("storage_s3", *on(dask_cluster)))

    assert result["outputs"] == {"Output": "RIVER DATA"}
    assert_ran_on(tasks_by_name(result), workers)


def test_a_secret_a_task_prints_is_masked_in_the_log_sent_back_in_band(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    value = "dask-s3cret-Hunter2-value"
    assert headwater("secrets", "set", "db", f"password={value}").returncode == 0

    result = headwater.run("k8s_secret_leak", *on(dask_cluster))

    summary = run_failed(result)
    # The log came back with the result (it is small) and went into the run's folder here.
    log = log_text(tasks_by_name(headwater.show(summary["run_id"]))["leak"])
    assert {"printed: ***", "split: ***", "child: ***"} <= set(log.splitlines()), log
    task = tasks_by_name(summary)["leak"]
    assert task["executor"] == "dask" and task["error"]["message"].endswith("'***'"), task
    assert value not in result.stdout + result.stderr
    for root in (headwater.home, dask_cluster.directory):
        leaks = [
            str(path)
            for path in root.rglob("*")
            if path.is_file()
            and "secrets" not in path.parts
            and value.encode() in path.read_bytes()
        ]
        assert leaks == []


# --- resources -------------------------------------------------------------------------------


def test_gpu_tasks_land_only_on_the_worker_with_a_gpu(
    headwater: Cli,
    dask_cluster_factory: StartCluster,
) -> None:
    cluster = dask_cluster_factory(workers=[WorkerSpec("plain"), WorkerSpec("gpu", "GPU=1")])
    gpu_worker = cluster.address_of("gpu")

    cli = headwater.run("dask_placement", *on(cluster))

    result = run_ok(cli)
    # Each GPU task saw the environment of the worker that has the GPU.
    assert result["outputs"] == {"Output": ["gpu"] * 4}
    tasks = tasks_by_name(result)
    for index in range(4):
        assert tasks[f"on-gpu[{index}]"]["worker"] == gpu_worker, tasks
    assert_ran_on(tasks, set(cluster.query()))
    # A worker with a GPU exists: nothing to warn about.
    assert "warning" not in cli.stderr.lower(), cli.stderr
    shown = tasks_by_name(headwater.show(result["run_id"]))
    assert "gpu task 2 ran on gpu" in log_text(shown["on-gpu[2]"])


def test_gpu_task_without_gpu_workers_runs_after_a_warning(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    cli = headwater.run("task_gpu", *on(dask_cluster))

    result = run_ok(cli)
    assert_ran_on(tasks_by_name(result), set(dask_cluster.query()))
    warnings = [line for line in cli.stderr.splitlines() if "warning" in line.lower()]
    assert len(warnings) == 1, cli.stderr
    assert "wants-gpu" in warnings[0] and "--strict-resources" in warnings[0], warnings


def test_gpu_task_without_gpu_workers_fails_when_strict(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    started_at = time.monotonic()
    cli = headwater.run("task_gpu", "--strict-resources", *on(dask_cluster))

    result = run_failed(cli)
    assert time.monotonic() - started_at < 30
    assert task_states(result) == {"wants-gpu": "FAILED"}
    message = result["tasks"][0]["error"]["message"]
    assert "nvidia.com/gpu" in message or "GPU" in message, message


@pytest.mark.parametrize(
    ("pipeline_name", "request_shown"),
    [
        pytest.param("too_many_cpus", ["512"], id="cpu"),
        # 100Ti as written, in bytes, or in a larger unit.
        pytest.param(
            "too_much_memory", ["100Ti", "109951162777600", "100 TiB", "102400"], id="memory"
        ),
    ],
)
def test_a_request_no_worker_can_meet_fails_at_once(
    headwater: Cli,
    dask_cluster: DaskCluster,
    pipeline_name: str,
    request_shown: list[str],
) -> None:
    started_at = time.monotonic()
    cli = headwater(
        "run",
        pipeline("dask_resources"),
        "--pipeline",
        pipeline_name,
        "--json",
        *on(dask_cluster),
        timeout=60,
    )

    elapsed = time.monotonic() - started_at
    result = run_failed(cli)
    assert elapsed < 20, f"took {elapsed:.1f}s to refuse"
    assert task_states(result) == {"greedy": "FAILED"}
    message = result["tasks"][0]["error"]["message"]
    # It names the request and what the workers offer.
    assert any(shown in message for shown in request_shown), message
    assert "worker" in message.lower(), message


# --- faults ----------------------------------------------------------------------------------


def kill_worker_under(cluster: DaskCluster, pid_file: Path) -> tuple[int, str]:
    """Wait for a task to write its pid; SIGKILL the worker process running it.

    Returns:
        The task's pid and the killed worker's address.
    """
    wait_for(pid_file.is_file, 60, "the task to start on a worker")
    task_pid = int(pid_file.read_text())
    address, worker_pid = worker_of(cluster, task_pid)
    os.kill(worker_pid, signal.SIGKILL)
    return task_pid, address


def test_worker_killed_mid_task_is_retried_by_the_tasks_policy(
    headwater: Cli,
    tmp_path: Path,
    scratch: Path,
    dask_cluster_factory: StartCluster,
) -> None:
    cluster = dask_cluster_factory()
    args = [pipeline("dask_victim"), "--pipeline", "victim_retried"]
    args += ["--param", f"scratch={scratch}"]
    task_pid: int | None = None
    with started(headwater, tmp_path, *args, *on(cluster)) as (proc, where):
        task_pid, killed = kill_worker_under(cluster, scratch / "pid")
        result = run_ok(finished(proc, where, timeout=60))

    try:
        # The second attempt ran (once: Dask did not run it again by itself) and succeeded.
        assert result["outputs"] == {"Output": 2}
        assert len(list((scratch / "attempts").iterdir())) == 2
        [task] = tasks_by_name(result).values()
        assert task["state"] == "SUCCEEDED" and task["worker"] != killed, task
        [shown] = tasks_by_name(headwater.show(result["run_id"])).values()
        assert shown["attempts"] == 2, shown
        # The killed worker's task went with it.
        wait_for(lambda: process_gone(task_pid), 10, f"the first attempt ({task_pid}) to end")
    finally:
        if not process_gone(task_pid):
            os.kill(task_pid, signal.SIGKILL)


def test_worker_killed_mid_task_without_retries_fails_the_task(
    headwater: Cli,
    tmp_path: Path,
    scratch: Path,
    dask_cluster_factory: StartCluster,
) -> None:
    cluster = dask_cluster_factory()
    args = [pipeline("dask_victim"), "--pipeline", "victim_once", "--param", f"scratch={scratch}"]
    with started(headwater, tmp_path, *args, *on(cluster)) as (proc, where):
        task_pid, _ = kill_worker_under(cluster, scratch / "pid")
        killed_at = time.monotonic()
        result = run_failed(finished(proc, where, timeout=60))

    assert time.monotonic() - killed_at < 30
    assert task_states(result) == {"victim": "FAILED"}
    message = result["tasks"][0]["error"]["message"]
    assert "worker" in message.lower(), message
    # Exactly one attempt: Dask did not quietly run the task again on the other worker.
    assert len(list((scratch / "attempts").iterdir())) == 1
    wait_for(lambda: process_gone(task_pid), 10, f"the task ({task_pid}) to end")


def test_scheduler_lost_mid_run_fails_fast_and_resumes_on_another(
    headwater: Cli,
    tmp_path: Path,
    scratch: Path,
    dask_cluster_factory: StartCluster,
) -> None:
    first = dask_cluster_factory()
    args = [pipeline("storage_nap"), "--param", f"scratch={scratch}"]
    task_pid: int | None = None
    try:
        with started(headwater, tmp_path, *args, *on(first)) as (proc, where):
            wait_for((scratch / "pid").is_file, 60, "the nap task to start")
            task_pid = int((scratch / "pid").read_text())
            first.kill_scheduler()
            lost_at = time.monotonic()
            cli = finished(proc, where, timeout=60)
            elapsed = time.monotonic() - lost_at

        result = run_failed(cli)
        assert elapsed < SCHEDULER_LOST_S, f"the run took {elapsed:.1f}s to fail"
        assert "Traceback" not in cli.stderr
        error = result["error"]
        text = error if isinstance(error, str) else error["message"]
        assert "\n" not in text.strip() and "scheduler" in text.lower(), text
        run_id = result["run_id"]

        second = dask_cluster_factory()
        (scratch / "marker").touch()
        resumed = run_ok(headwater("run", "--resume", run_id, "--json", *on(second)))
        assert resumed["run_id"] == run_id
        assert resumed["outputs"] == {"Output": "quick+nap"}
        assert cached_flags(resumed) == {"quick": True, "nap": False}
        assert_ran_on(tasks_by_name(resumed), set(second.query()))
    finally:
        if task_pid is not None and not process_gone(task_pid):
            os.kill(task_pid, signal.SIGKILL)


def test_ctrl_c_stops_the_task_processes_on_the_workers(
    headwater: Cli,
    tmp_path: Path,
    scratch: Path,
    dask_cluster: DaskCluster,
) -> None:
    args = [pipeline("runtime_sleeper"), "--param", f"scratch={scratch}"]
    task_pid: int | None = None
    try:
        with started(headwater, tmp_path, *args, *on(dask_cluster)) as (proc, where):
            wait_for((scratch / "pid").is_file, 60, "the sleeper task to start")
            task_pid = int((scratch / "pid").read_text())
            worker_of(dask_cluster, task_pid)  # it runs under a worker, not the engine

            proc.send_signal(signal.SIGINT)
            cli = finished(proc, where, timeout=15)

        assert cli.returncode == 130, cli.describe()
        assert "interrupted" in cli.stderr and "Traceback" not in cli.stderr
        wait_for(lambda: process_gone(task_pid), 10, f"the task process {task_pid} to end")
    finally:
        if task_pid is not None and not process_gone(task_pid):
            os.kill(task_pid, signal.SIGKILL)


def test_a_killed_engine_leaves_no_task_running_on_the_workers(
    headwater: Cli,
    tmp_path: Path,
    scratch: Path,
    dask_cluster: DaskCluster,
) -> None:
    """SIGKILL gives the engine no chance to cancel anything: the workers must notice."""
    args = [pipeline("runtime_sleeper"), "--param", f"scratch={scratch}"]
    task_pid: int | None = None
    try:
        with started(headwater, tmp_path, *args, *on(dask_cluster)) as (proc, _):
            wait_for((scratch / "pid").is_file, 60, "the sleeper task to start")
            task_pid = int((scratch / "pid").read_text())
            worker_of(dask_cluster, task_pid)  # it runs under a worker, not the engine

            proc.kill()
            proc.wait()

        wait_for(
            lambda: process_gone(task_pid),
            ENGINE_KILLED_S,
            f"the task process {task_pid} of the killed engine to end",
        )
    finally:
        if task_pid is not None and not process_gone(task_pid):
            os.kill(task_pid, signal.SIGKILL)


# --- bad input -------------------------------------------------------------------------------


@pytest.fixture
def silent_scheduler() -> Iterator[str]:
    """An address that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"tcp://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    ("address", "how"),
    [
        pytest.param("tcp://127.0.0.1:1", "flag", id="refused"),
        pytest.param("tcp://127.0.0.1:1", "env", id="refused-from-env"),
        pytest.param("silent", "flag", id="never-answers"),
    ],
)
def test_unreachable_scheduler_is_one_line_within_seconds(
    headwater: Cli, silent_scheduler: str, address: str, how: str
) -> None:
    address = silent_scheduler if address == "silent" else address
    args = ["run", pipeline("storage_s3"), "--executor", "dask"]
    if how == "flag":
        args += ["--scheduler", address]
    else:
        headwater.env["HEADWATER_DASK_SCHEDULER"] = address

    started_at = time.monotonic()
    cli = headwater(*args, timeout=60)
    elapsed = time.monotonic() - started_at

    line = one_line(cli)
    assert address in line, line
    # The bound is the 5 s on an idle machine. Under a loaded test run the interpreter's
    # own start-up and its import of Dask can take seconds more; only that slowness, measured
    # now on the same command refused at once by a closed port, is added, never the time spent
    # waiting for the scheduler. (A command that never imports Dask missed that share of the
    # slowness, and the bound failed under load: 5.5 s and 5.8 s with 0.0-0.2 s measured.)
    started_at = time.monotonic()
    refused = ["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1"]
    one_line(headwater("run", pipeline("storage_s3"), *refused, timeout=60))
    slow_start = max(0.0, time.monotonic() - started_at - IDLE_DASK_REFUSED_S)
    assert elapsed < UNREACHABLE_S + slow_start, (
        f"took {elapsed:.1f}s ({slow_start:.1f}s slow start)"
    )
    assert headwater.runs() == []


def test_unknown_executor_is_one_line(headwater: Cli) -> None:
    line = one_line(headwater("run", pipeline("storage_s3"), "--executor", "nope"))

    assert "'nope'" in line or "nope" in line, line
    assert "local" in line and "dask" in line, line


@pytest.mark.parametrize(
    "scheduler",
    [pytest.param([], id="local-cluster"), pytest.param(["--scheduler", "tcp://127.0.0.1:1"])],
)
def test_missing_dask_extra_is_one_line(headwater: Cli, scheduler: list[str]) -> None:
    # dask and distributed made unimportable, as in an install without the extra.
    code = (
        "import sys; sys.modules['dask'] = sys.modules['distributed'] = None\n"
        "from headwater.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    argv = ["run", pipeline("storage_s3"), "--executor", "dask", *scheduler]
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=headwater.env,
        cwd=headwater.cwd,
        timeout=60,
    )

    line = one_line(CliResult.of(proc.returncode, proc.stdout, proc.stderr))
    assert "pip install 'headwater[dask]'" in line, line
