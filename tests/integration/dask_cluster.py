"""A real Dask cluster on loopback for integration tests: `dask scheduler` and `dask worker`.

Import the fixtures into a test module to use them::

    from dask_cluster import DaskCluster  # the fixtures are registered in conftest.py

`dask_cluster` is session-scoped (one per pytest-xdist worker): a scheduler and two plain
workers (one on 127.0.0.1, one on 127.0.0.2), for tests that only run pipelines on it.
`dask_cluster_factory` starts clusters for one test (a worker with `GPU=1`, a worker to kill,
a scheduler to kill) and stops them after.

Every process is a real subprocess started the way a user starts them. The scheduler runs
with Dask's own re-run of tasks whose worker died switched off
(`DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0`), as Headwater requires, so a killed
worker fails the attempt and the task's retry policy decides. Each worker runs in its own
working directory with HEADWATER_HOME inside it, so nothing is written outside tmp. The
cluster is queried through a short-lived `distributed.Client` in a separate interpreter:
distributed never runs in the pytest process (`filterwarnings = error`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_START_TIMEOUT_S = 60
_STOP_TIMEOUT_S = 10
# The caller's settings that would point a worker's tasks at another store or root, or make
# a GPU visible to them (as conftest.py clears them for the engine).
_CLEARED_ENV = ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "CUDA_VISIBLE_DEVICES")
#: The variable each worker's environment names it by; a task can print it to show where it ran.
WORKER_NAME_ENV = "HW_TEST_DASK_WORKER"

# Run in a fresh interpreter: wait until `n` workers are registered, then print the
# scheduler's view of them and each worker process's pid as one JSON line.
_QUERY_SCRIPT = """
import json, os, sys, time
from distributed import Client
address, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with Client(address, timeout=timeout) as client:
    client.wait_for_workers(n, timeout=timeout)
    workers = client.scheduler_info(n_workers=-1)["workers"]
    pids = client.run(os.getpid)
fields = ("name", "host", "nthreads", "memory_limit", "resources")
shown = {a: {**{f: w.get(f) for f in fields}, "pid": pids.get(a)} for a, w in workers.items()}
print(json.dumps(shown))
"""


def _dask_cli() -> list[str]:
    """The `dask` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("dask")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dask"]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate `proc`, then kill it if it has not ended after a while."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
    try:
        proc.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class WorkerSpec:
    """One `dask worker` process to start: its name and the resources it advertises."""

    name: str
    resources: str | None = None  # as `--resources` takes it, e.g. "GPU=1"
    nthreads: int = 2
    host: str = "127.0.0.1"  # the address it listens on (any of 127.0.0.0/8 is this machine)


@dataclass
class DaskWorker:
    """A running `dask worker` (a nanny and its worker process) and its directory."""

    spec: WorkerSpec
    proc: subprocess.Popen[bytes]
    cwd: Path
    log: Path


@dataclass
class DaskCluster:
    """A running scheduler and its workers on loopback (127.0.0.1 unless a spec says)."""

    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[DaskWorker]
    directory: Path
    env: dict[str, str] = field(repr=False)

    def logs(self) -> str:
        """The tail of every process's log, for a failing test's message."""
        parts = []
        for log in [self.directory / "scheduler.log", *(w.log for w in self.workers)]:
            text = log.read_text(errors="replace") if log.exists() else "(no log)"
            parts.append(f"--- {log.name} ---\n" + "\n".join(text.splitlines()[-30:]))
        return "\n".join(parts)

    def query(self, n_workers: int | None = None, timeout: float = _START_TIMEOUT_S) -> dict:
        """The registered workers by address (name, host, nthreads, memory_limit, resources
        and pid), once at least `n_workers` (default: all started) are there."""
        wanted = len(self.workers) if n_workers is None else n_workers
        proc = subprocess.run(
            [sys.executable, "-c", _QUERY_SCRIPT, self.address, str(wanted), str(timeout)],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout + 30,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"cannot query the scheduler at {self.address}:\n{proc.stderr[-3000:]}\n"
                + self.logs()
            )
        workers: dict[str, dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
        return workers

    def address_of(self, name: str) -> str:
        """The address of the worker named `name`, as Headwater records it."""
        (address,) = [a for a, w in self.query().items() if w["name"] == name]
        return address

    def worker_env(self, spec: WorkerSpec, cwd: Path) -> dict[str, str]:
        env = {**self.env, "HEADWATER_HOME": str(cwd / "headwater-home")}
        env[WORKER_NAME_ENV] = spec.name
        return env

    def start_worker(self, spec: WorkerSpec) -> DaskWorker:
        """Start one more worker (in its own directory); do not wait for it to register."""
        cwd = self.directory / spec.name
        cwd.mkdir()
        argv = [*_dask_cli(), "worker", self.address, "--name", spec.name]
        argv += ["--nthreads", str(spec.nthreads), "--nworkers", "1", "--no-dashboard"]
        argv += ["--host", spec.host, "--local-directory", str(cwd / "dask-scratch")]
        # A worker left behind by a test that crashed goes away once its scheduler is gone.
        argv += ["--death-timeout", "60"]
        if spec.resources:
            argv += ["--resources", spec.resources]
        log = self.directory / f"{spec.name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=self.worker_env(spec, cwd),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = DaskWorker(spec, proc, cwd, log)
        self.workers.append(worker)
        return worker

    def kill_scheduler(self) -> None:
        """SIGKILL the scheduler, as a lost machine would lose it."""
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()

    def stop(self) -> None:
        """Stop the workers, then the scheduler: terminate, then kill what is left."""
        for worker in self.workers:
            with contextlib.suppress(ProcessLookupError):
                worker.proc.terminate()
        for worker in self.workers:
            _stop(worker.proc)
            # A nanny killed after the timeout leaves its worker process: end the group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.proc.pid, signal.SIGKILL)
        _stop(self.scheduler)


def start_cluster(
    directory: Path,
    workers: list[WorkerSpec],
    env: Mapping[str, str] | None = None,
) -> DaskCluster:
    """Start a scheduler on 127.0.0.1 (a free port) and `workers`; return once all registered.

    Args:
        directory: An empty directory for the logs, the scheduler file and the workers'
            working directories.
        workers: The workers to start.
        env: The environment of every process (default: this one's), without the settings
            in `_CLEARED_ENV`.

    Raises:
        RuntimeError: The scheduler or a worker did not come up in time (with their logs).
    """
    environment = dict(os.environ if env is None else env)
    for name in _CLEARED_ENV:
        environment.pop(name, None)
    environment.pop("HEADWATER_HOME", None)
    environment["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = "0"
    directory.mkdir(parents=True, exist_ok=True)
    scheduler_file = directory / "scheduler.json"
    argv = [*_dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
    argv += ["--scheduler-file", str(scheduler_file)]
    with (directory / "scheduler.log").open("ab") as out:
        scheduler = subprocess.Popen(
            argv,
            cwd=directory,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cluster = DaskCluster("", scheduler, [], directory, environment)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not cluster.address:
            if scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler did not start:\n{cluster.logs()}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                cluster.address = json.loads(scheduler_file.read_text())["address"]
            time.sleep(0.05)
        for spec in workers:
            cluster.start_worker(spec)
        cluster.query()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def worker_of(cluster: DaskCluster, pid: int) -> tuple[str, int]:
    """The address and pid of the cluster's worker process that `pid` descends from."""
    by_pid = {w["pid"]: address for address, w in cluster.query().items()}
    current = pid
    while current > 1:
        if current in by_pid:
            return by_pid[current], current
        stat = Path(f"/proc/{current}/stat").read_text()
        current = int(stat.rpartition(")")[2].split()[1])
    raise AssertionError(f"process {pid} does not descend from a worker of {cluster.address}")


#: Worker b listens on 127.0.0.2, which is this machine as much as 127.0.0.1 is (Linux
#: answers the whole 127.0.0.0/8 block on `lo`): a local pipeline root works on both.
PLAIN_WORKERS = [WorkerSpec("worker-a"), WorkerSpec("worker-b", host="127.0.0.2")]


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    """A scheduler and two plain workers for this session (this xdist worker)."""
    pytest.importorskip("distributed")
    cluster = start_cluster(tmp_path_factory.mktemp("dask"), PLAIN_WORKERS)
    try:
        yield cluster
    finally:
        cluster.stop()


StartCluster = Callable[..., DaskCluster]


@pytest.fixture
def dask_cluster_factory(tmp_path: Path) -> Iterator[StartCluster]:
    """Start clusters for this test: `start(workers=[...], env=None)`; all stopped after."""
    pytest.importorskip("distributed")
    started: list[DaskCluster] = []

    def start(
        workers: list[WorkerSpec] = PLAIN_WORKERS, env: Mapping[str, str] | None = None
    ) -> DaskCluster:
        cluster = start_cluster(tmp_path / f"dask-{len(started)}", workers, env)
        started.append(cluster)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop()
