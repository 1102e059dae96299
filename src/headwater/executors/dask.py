"""`DaskExecutor`: every task on a Dask cluster, local or remote, with no shared filesystem.

Each attempt is one Dask task, `dask_worker.run_attempt`, which runs the KFP task as its own
process forked from the worker's warm fork server and returns its outcome in-band. Artifacts
travel through the pipeline root (an `s3://` or `gs://` root, or a local one that every worker
sees: workers on this host, or `--shared-fs`); each attempt's log is stored beside the task's
outputs and copied to the run's folder here, so `headwater logs` works as with the local
executor.

Resources: a task's CPU, memory and accelerator requests become the Dask worker resources
`CPU`, `MEMORY` (bytes) and `GPU` when some worker advertises them
(`dask worker ADDRESS --resources "GPU=1,CPU=8,MEMORY=32e9"`); without advertised `CPU` or
`MEMORY`, a request is checked against each worker's threads and memory limit. A request that
no worker can ever meet fails at once, never waits in Dask's queue. A task asking for
accelerators on a cluster where no worker advertises any runs without them, after a warning,
as on one machine (`--strict-resources` refuses it).

Faults: a worker that dies mid-task fails that attempt as retryable, so the task's own retry
policy decides. That needs the scheduler not to re-run the task itself: the LocalCluster made
here sets `distributed.scheduler.allowed-failures` to 0; start your own scheduler with
`DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0`. A scheduler lost mid-run fails the run
within seconds (resume it on another cluster with `headwater run --resume`). An engine lost
mid-run leaves no task running: its client's connection is the lease on its tasks, and the
workers stop their processes about a second after the scheduler saw the client go (at once
when the engine is killed or crashes; after Dask's TCP timeout when its machine vanishes; see
`dask_worker`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from typing import Any

from headwater import config
from headwater._deps import require
from headwater.artifacts import is_remote_uri
from headwater.errors import ExecutorLostError, MissingDependencyError, UserError
from headwater.executors.base import Executor
from headwater.executors.dask_admission import DaskAdmission, match_resources
from headwater.executors.dask_cluster import (
    connect_client,
    local_addresses,
    refuse_local_root,
    start_local_cluster,
)
from headwater.logs import appending
from headwater.task import Launch, TaskError, TaskResult

#: How long worker information is trusted before it is asked for again.
_INFO_TTL_S = 1.0


def _distributed() -> Any:
    try:
        return require("distributed", "dask", "the dask executor")
    except MissingDependencyError as exc:
        # Still a UserError: `--executor dask` without the extra exits 2, as
        # tests/integration/test_dask_executor.py::test_missing_dask_extra_is_one_line pins.
        raise UserError(str(exc)) from exc


class DaskExecutor(Executor):
    """Run each attempt on a Dask cluster: at `scheduler`, or a LocalCluster made for the run.

    Args:
        scheduler: The scheduler's address (`tcp://host:8786`), a `distributed.Client`, or
            None for `$HEADWATER_DASK_SCHEDULER`, else a LocalCluster sized to this machine
            (a LocalCUDACluster, one worker per GPU, when GPUs and dask-cuda are there).
        shared_fs: Every worker sees a local pipeline root at the same path (NFS, say).
        install_packages: Install missing `packages_to_install` on the workers.
    """

    name = "dask"
    resolves_packages = True

    def __init__(
        self,
        scheduler: Any = None,
        *,
        shared_fs: bool = False,
        install_packages: bool = False,
    ) -> None:
        distributed = _distributed()
        self._shared_fs = shared_fs
        self._install = install_packages
        self._cluster: Any = None
        self._own_client = True
        self._key = uuid.uuid4().hex[:12]
        address = scheduler if scheduler is not None else config.dask_scheduler()
        if isinstance(address, distributed.Client):
            self._client: Any = address
            self._own_client = False
        elif address:
            self._client = connect_client(distributed, str(address))
        else:
            self._cluster = start_local_cluster()
            self._client = distributed.Client(self._cluster)
        try:
            self.address = str(self._client.scheduler.address)
            self.dashboard = self._client.dashboard_link
            self._wait_for_workers()
            from headwater.executors.dask_worker import HeadwaterPlugin

            self._client.register_plugin(HeadwaterPlugin(), name="headwater")
        except BaseException:
            self.shutdown()
            raise
        self._futures: dict[str, tuple[Launch, Any]] = {}
        self._pending: list[Launch] = []
        self._done: queue.Queue[Any] = queue.Queue()
        self._resources: dict[int, dict[str, float]] = {}
        self._info: dict[str, Any] = {}
        self._info_at = 0.0
        self._stores: dict[str, Any] = {}

    # --- what the engine asks before a run ----------------------------------------------------

    def describe(self) -> str:
        """One line: where tasks run (the cluster and its dashboard)."""
        workers = self._workers()
        kind = "a local Dask cluster" if self._cluster is not None else "the Dask cluster"
        threads = sum(int(w.get("nthreads") or 0) for w in workers.values())
        return (
            f"running on {kind} at {self.address} ({len(workers)} workers, {threads} threads); "
            f"dashboard: {self.dashboard}"
        )

    def check_root(self, root: str) -> None:
        """Refuse a local root when a worker is on another host (unless `shared_fs`)."""
        if is_remote_uri(root) or self._shared_fs:
            return
        hosts = [str(w.get("host") or "") for w in self._workers().values()]
        refuse_local_root(root, hosts, local_addresses())

    def admission(self, *, max_parallel: int | None, strict: bool) -> DaskAdmission:
        """Admission by the cluster's workers: their resources, and `--max-parallel` if set."""
        return DaskAdmission(self, max_parallel=max_parallel, strict=strict)

    # --- running ------------------------------------------------------------------------------

    def submit(self, launch: Launch) -> None:
        """Queue the attempt for the scheduler; it is sent with the others ready now.

        The engine submits every task it admits in one pass, then waits: `wait` sends what
        was queued as one graph per set of resources, which costs the scheduler far less than
        one graph per task (a 200-way fan-out is one message, not 200).
        """
        self._pending.append(launch)

    def _flush(self) -> None:
        """Send the queued attempts: one `Client.map` per distinct resource request."""
        if not self._pending:
            return
        from headwater.executors.dask_worker import run_attempt

        groups: dict[tuple[tuple[str, float], ...], list[Launch]] = {}
        for launch in self._pending:
            asked = self._resources.pop(launch.task_id, None) or {}
            groups.setdefault(tuple(sorted(asked.items())), []).append(launch)
        self._pending = []
        for wanted, launches in groups.items():
            keys = [f"{_dask_name(launch.name)}-{uuid.uuid4().hex[:12]}" for launch in launches]
            futures = self._client.map(
                run_attempt,
                launches,
                [self._key] * len(launches),
                [_log_uri(launch) for launch in launches],
                [self._install] * len(launches),
                key=keys,
                pure=False,
                resources=dict(wanted) or None,
                retries=0,
            )
            for key, launch, future in zip(keys, launches, futures, strict=True):
                self._futures[key] = (launch, future)
                future.add_done_callback(self._done.put)

    def wait(self, timeout: float | None) -> list[TaskResult]:
        """Results of the attempts that ended within `timeout` seconds."""
        self._flush()
        if not self._futures:
            return []
        ended: list[tuple[Launch, Any]] = []
        block = True
        while True:
            try:
                future = self._done.get(block=block, timeout=timeout if block else None)
            except queue.Empty:
                break
            block = False
            entry = self._futures.pop(future.key, None)
            if entry is not None:  # else: cancelled earlier
                ended.append((entry[0], future))
        if not ended:
            self._check_scheduler()
            return []
        values = self._gather([f for _, f in ended if f.status == "finished"])
        return [self._outcome(launch, future, values.get(future.key)) for launch, future in ended]

    def _gather(self, futures: list[Any]) -> dict[str, Any]:
        """The results of finished attempts, fetched in one round trip (those it got)."""
        if len(futures) < 2:
            return {}  # one: `_outcome` fetches it
        try:
            values = self._client.gather(futures)
        except Exception:  # one of them is gone: `_outcome` fetches each and says which
            return {}
        return {f.key: v for f, v in zip(futures, values, strict=True)}

    def _outcome(self, launch: Launch, future: Any, value: TaskResult | None = None) -> TaskResult:
        status = future.status
        if status == "finished":
            try:
                result: TaskResult = value if value is not None else future.result(timeout=30)
            except Exception as exc:  # the result could not be fetched from the worker
                self._check_scheduler()
                return _failed(launch, "WorkerLost", f"its result was lost: {exc}")
            self._fetch_log(launch, result)
            result.task_id = launch.task_id
            return result
        if status == "cancelled":
            self._check_scheduler()
            return _failed(launch, "Cancelled", "Dask cancelled the task")
        if status == "lost":  # it finished, but the worker holding its result died
            return _failed(launch, "WorkerLost", "the Dask worker holding its result died")
        error = future.exception(timeout=30)
        from distributed.scheduler import KilledWorker

        if isinstance(error, KilledWorker):
            why = "the Dask worker running it died (killed, or out of memory)"
            return _failed(launch, "WorkerLost", f"{why}: {error}")
        # `run_attempt` itself failed on the worker: Headwater missing there, a broken worker.
        return _failed(
            launch,
            type(error).__name__,
            f"the Dask worker could not run it: {error}",
            retryable=False,
        )

    def _fetch_log(self, launch: Launch, result: TaskResult) -> None:
        """Append the attempt's stored log to the run's copy here, where `headwater logs` looks
        (below a line marking the attempt's start, under the log's cap)."""
        if not result.log_uri:
            return
        try:
            launch.log_path.parent.mkdir(parents=True, exist_ok=True)
            with appending(str(launch.log_path), launch.attempt, launch.log_limit) as write:
                if result.log_bytes is not None:  # it came with the result
                    write(result.log_bytes)
                    result.log_bytes = None
                    return
                store = self._store(launch.placeholders.pipeline_root)
                with tempfile.TemporaryDirectory(prefix="headwater-log-") as tmp:
                    local = os.path.join(tmp, "log.txt")
                    store.download(result.log_uri, local)
                    with open(local, "rb") as src:
                        while chunk := src.read(1 << 20):
                            write(chunk)
        except Exception as exc:  # the log is a convenience; the result stands without it
            print(
                f"headwater: warning: could not copy the log of {launch.name!r} from "
                f"{result.log_uri}: {exc}",
                file=sys.stderr,
            )

    def _store(self, root: str) -> Any:
        store = self._stores.get(root)
        if store is None:
            from headwater.artifacts import store_for

            store = self._stores[root] = store_for(root)
        return store

    def _check_scheduler(self) -> None:
        """Raise when the scheduler is gone: the run cannot go on (it can be resumed)."""
        status = str(getattr(self._client, "status", "running"))
        if status in ("running", "newly-created"):
            return
        raise ExecutorLostError(
            f"lost the Dask scheduler at {self.address} (client {status}): the run stops here",
            resume_flags="--executor dask --scheduler ADDRESS",
        )

    def running(self) -> int:
        """Attempts submitted and not yet reported."""
        return len(self._futures) + len(self._pending)

    def cancel(self) -> None:
        """Cancel every attempt in flight and stop their task processes on the workers."""
        self._pending = []
        if not self._futures:
            return
        futures = [f for _, f in self._futures.values()]
        self._futures.clear()
        with contextlib.suppress(Exception):
            self._client.cancel(futures, force=True)
        from headwater.executors.dask_worker import cancel_run

        with contextlib.suppress(Exception):
            self._client.run(cancel_run, self._key, on_error="ignore")

    def shutdown(self, *, kill: bool = False) -> None:
        """Close the client (and the LocalCluster made for the run)."""
        if kill:
            with contextlib.suppress(Exception):
                self.cancel()
        if self._own_client:
            with contextlib.suppress(Exception):
                self._client.close(timeout=5)
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close(timeout=10)
            self._cluster = None

    # --- the cluster's workers ----------------------------------------------------------------

    def _workers(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        if now - self._info_at > _INFO_TTL_S or not self._info:
            try:
                info = self._client.scheduler_info(n_workers=-1)
            except Exception:
                self._check_scheduler()
                raise
            self._info = dict(info.get("workers") or {})
            self._info_at = now
        return self._info

    def _wait_for_workers(self) -> None:
        timeout = config.dask_worker_timeout_s()
        try:
            self._client.wait_for_workers(1, timeout=timeout)
        except (TimeoutError, OSError) as exc:
            raise UserError(
                f"the Dask scheduler at {self.address} has no workers after "
                f"{timeout:g} s: start some (dask worker {self.address}), or set "
                f"{config.DASK_WORKER_TIMEOUT_ENV} to wait longer"
            ) from exc

    def resources_for(self, launch: Launch, *, strict: bool) -> tuple[dict[str, float], str | None]:
        """The Dask resources `launch` asks of a worker, and a warning to show (or None).

        Raises:
            ResourceError: No worker can ever meet the request (or, with `strict`, a task
                asks for accelerators and no worker has any).
        """
        return match_resources(launch, self._workers(), address=self.address, strict=strict)

    def remember(self, task_id: int, resources: Mapping[str, float]) -> None:
        """Keep what `check` decided for the attempt that `submit` sends next."""
        self._resources[task_id] = dict(resources)


def _log_uri(launch: Launch) -> str | None:
    """Where the attempt's log is stored: beside the task's outputs, under the pipeline root."""
    return f"{launch.task_root}/log-attempt-{launch.attempt}.txt" if launch.task_root else None


def _failed(launch: Launch, kind: str, message: str, *, retryable: bool = True) -> TaskResult:
    error = TaskError(launch.name, kind, message, log_path=str(launch.log_path))
    return TaskResult(launch.task_id, error=error, retryable=retryable)


def _dask_name(name: str) -> str:
    """A task name as a Dask key prefix (the dashboard groups tasks by it)."""
    return "hw-" + (re.sub(r"[^A-Za-z0-9_.]+", "_", name)[:60] or "task")
