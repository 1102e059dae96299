"""Dask clusters for components, notebooks and scripts: the run's own, or a local one.

Inside a component::

    from headwater.compute import get_client

    client = get_client()          # the run's cluster under --executor dask, else a local one
    df = dd.read_parquet(path)     # computes on it

In a notebook or script::

    from headwater.compute import cluster

    with cluster(memory_limit="2GB") as client:
        ...

`get_client` connects to the scheduler the engine hands the task (`HEADWATER_DASK_SCHEDULER`,
set for every task that `--executor dask` runs); anywhere else it starts a LocalCluster for the
process (a LocalCUDACluster with one worker per GPU when GPUs and dask-cuda are present), closed
when the process exits. Settings for a cluster it starts come from its arguments, else from the
task's environment (`task.set_env_variable(...)` in the pipeline), else from defaults that work on
a laptop:

==================================  ===========================================================
`HEADWATER_DASK_WORKERS`            worker processes (default: one per GPU, else min(cpus, 4))
`HEADWATER_DASK_THREADS`            threads per worker (default 1)
`HEADWATER_DASK_MEMORY_LIMIT`       host memory per worker before spilling to disk ("2GB",
                                    a fraction such as 0.4, or "auto": the machine's share)
`HEADWATER_DASK_SPILL_DIR`          where workers spill (default: the system's temp directory)
`HEADWATER_DASK_DEVICE_MEMORY_LIMIT`  GPU memory per worker before spilling to host (default
                                    80%)
`HEADWATER_RMM_POOL_SIZE`           an RMM pool per GPU worker ("8GB"; default none)
`HEADWATER_DASK_PAUSED_TIMEOUT`     seconds `compute` waits while the work is stuck on paused
                                    workers before it fails (default 60)
==================================  ===========================================================

`compute(...)` is `dask.compute` with a watchdog: Dask pauses a worker whose memory passes 80%
of its limit, and when every worker that could run the remaining tasks stays paused (memory
that spilling cannot free), Dask waits forever. `compute` fails instead, naming the workers,
their memory and the settings to change.

On GPU workers cuDF's own spilling is enabled (`enable_cudf_spill`), which spills buffers while
a task runs; dask-cuda's JIT unspill was removed in dask-cuda 26.06 and is not used.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from headwater import config
from headwater._deps import require
from headwater.errors import MissingDependencyError, ResourceError, UserError

__all__ = ["cluster", "compute", "get_client", "gpu_workers", "settings_from_env"]

_POLL_S = 0.5

_lock = threading.Lock()
_own: dict[str, Any] = {}  # the process's own cluster and client, made on first use


def _distributed() -> Any:
    return require("distributed", "dask", "headwater.compute")


def settings_from_env() -> dict[str, Any]:
    """The cluster settings the task's environment gives (see the module's table).

    Raises:
        ConfigError: One of them is not valid (a worker count that is not a whole number).
    """
    found = {
        "n_workers": config.dask_workers(),
        "threads_per_worker": config.dask_threads(),
        "memory_limit": config.dask_memory_limit(),
        "local_directory": config.dask_spill_dir(),
        "device_memory_limit": config.dask_device_memory_limit(),
        "rmm_pool_size": config.rmm_pool_size(),
    }
    return {name: value for name, value in found.items() if value is not None}


def get_client(**settings: Any) -> Any:
    """A `distributed.Client` for the run's cluster, or for a local one made once per process.

    Args:
        settings: For a cluster made here: `n_workers`, `threads_per_worker`, `memory_limit`,
            `local_directory` (spill), `device_memory_limit`, `rmm_pool_size`, `gpu` (True,
            False, or None to decide by the machine). Ignored when the run has a cluster.

    Raises:
        MissingDependencyError: `distributed` is not installed.
        UserError: The run's scheduler cannot be reached, or a setting is not valid.
    """
    distributed = _distributed()
    address = config.dask_scheduler()
    with _lock:
        client = _own.get("client")
        if client is not None and client.status == "running":
            return client
        if address:
            try:
                client = distributed.Client(address, timeout=10, set_as_default=True)
            except (OSError, TimeoutError) as exc:
                raise UserError(
                    f"cannot reach the run's Dask scheduler at {address} ({exc}); is the "
                    f"cluster still up? (unset {config.DASK_SCHEDULER_ENV} to use a local cluster)"
                ) from exc
        else:
            made = local_cluster(**{**settings_from_env(), **settings})
            _own["cluster"] = made
            client = distributed.Client(made, set_as_default=True)
        _own["client"] = client
        return client


def _close_own() -> None:
    client = _own.pop("client", None)
    made = _own.pop("cluster", None)
    with contextlib.suppress(Exception):
        if client is not None:
            client.close()
    with contextlib.suppress(Exception):
        if made is not None:
            made.close()


atexit.register(_close_own)


@contextlib.contextmanager
def cluster(**settings: Any) -> Iterator[Any]:
    """A local cluster and its client for the `with` block (closed after it).

    Takes the settings of `get_client` (and the environment's, as defaults).
    """
    distributed = _distributed()
    made = local_cluster(**{**settings_from_env(), **settings})
    try:
        with distributed.Client(made, set_as_default=False) as client:
            yield client
    finally:
        made.close()


def local_cluster(
    *,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | float | int = "auto",
    local_directory: str | None = None,
    device_memory_limit: str | float | int | None = None,
    rmm_pool_size: str | None = None,
    gpu: bool | None = None,
) -> Any:
    """A LocalCluster of worker processes, or a LocalCUDACluster (one worker per GPU).

    Raises:
        UserError: `gpu=True` on a machine without GPUs, or a setting Dask refuses.
        MissingDependencyError: `gpu=True` without dask-cuda installed.
    """
    from headwater.machine import detect_gpus, machine_cpus

    gpus = detect_gpus()
    want_gpu = bool(gpus) if gpu is None else gpu
    if want_gpu:
        if not gpus:
            raise UserError("gpu=True but this machine has no NVIDIA GPU visible")
        try:
            dask_cuda = require("dask_cuda", "gpu", "gpu=True")
        except MissingDependencyError:
            if gpu:
                raise
        else:
            return dask_cuda.LocalCUDACluster(
                CUDA_VISIBLE_DEVICES=",".join(gpus),
                n_workers=n_workers or len(gpus),
                threads_per_worker=threads_per_worker,
                memory_limit=memory_limit,
                device_memory_limit=device_memory_limit or 0.8,
                enable_cudf_spill=True,
                rmm_pool_size=rmm_pool_size,
                local_directory=local_directory,
                dashboard_address=":0",
                silence_logs=50,
            )
    from distributed import LocalCluster

    try:
        return LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=n_workers or min(machine_cpus(), 4),
            threads_per_worker=threads_per_worker,
            processes=True,
            memory_limit=memory_limit,
            local_directory=local_directory,
            dashboard_address=":0",
            silence_logs=50,
        )
    except (ValueError, TypeError) as exc:
        raise UserError(f"cannot start a local Dask cluster with these settings: {exc}") from exc


def gpu_workers(client: Any) -> bool:
    """True when every worker of `client`'s cluster has a GPU and cuDF: compute with cuDF."""

    def probe() -> bool:
        import importlib.util

        from headwater.machine import detect_gpus

        return bool(detect_gpus()) and importlib.util.find_spec("cudf") is not None

    answers = client.run(probe)
    return bool(answers) and all(answers.values())


def compute(*collections: Any, client: Any = None, paused_timeout_s: float | None = None) -> Any:
    """`dask.compute(*collections)` on `client` that fails, rather than hangs, on paused workers.

    Args:
        collections: Dask collections (or delayed objects) to compute together.
        client: A `distributed.Client`; None: `get_client()`.
        paused_timeout_s: How long the remaining tasks may wait on paused workers only, with
            none of them running anywhere else; None: `HEADWATER_DASK_PAUSED_TIMEOUT`, else 60.

    Returns:
        A tuple of results, one per collection, as `dask.compute` returns them.

    Raises:
        ResourceError: The work stayed stuck on paused workers for `paused_timeout_s`, or a
            worker died running one of its tasks (typically past 95% of its memory limit).
    """
    distributed = _distributed()
    client = client if client is not None else get_client()
    limit = paused_timeout_s if paused_timeout_s is not None else config.dask_paused_timeout_s()
    from dask.base import is_dask_collection
    from dask.delayed import delayed

    # dask.compute accepts plain lists of delayed objects; Client.compute wants collections.
    wrapped = [c if is_dask_collection(c) else delayed(c) for c in collections]
    futures = client.compute(wrapped)
    keys = [f.key for f in futures]
    stuck_since: float | None = None
    try:
        while not all(f.done() for f in futures):
            time.sleep(_POLL_S)
            if any(f.status == "error" for f in futures):
                break
            stuck = _stuck_on_paused(client, keys)
            now = time.monotonic()
            if stuck is None:
                stuck_since = None
                continue
            stuck_since = stuck_since if stuck_since is not None else now
            if now - stuck_since >= limit:
                raise ResourceError(
                    f"the Dask computation made no progress for {limit:.0f} s: its remaining "
                    f"tasks wait on paused workers ({stuck}); a worker pauses above 80% of its "
                    "memory limit. Give workers more memory (HEADWATER_DASK_MEMORY_LIMIT or "
                    "the cluster's --memory-limit), use smaller partitions, or raise "
                    f"{config.DASK_PAUSED_TIMEOUT_ENV}"
                )
        try:
            return tuple(client.gather(futures))
        except distributed.KilledWorker as exc:
            raise ResourceError(
                f"a Dask worker died running {exc.task!r} (Dask gave up after it killed "
                f"{exc.allowed_failures + 1} worker(s)); the usual cause is memory above 95% of "
                "the worker's limit: give workers more memory or use smaller partitions"
            ) from exc
    finally:
        for future in futures:
            if not future.done():
                future.cancel()


def _stuck_on_paused(client: Any, keys: list[Any]) -> str | None:
    """Paused workers that hold up `keys` while no other worker runs any of their tasks.

    Returns:
        The paused workers and their memory, as text, when stuck; None otherwise.
    """
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    paused = {a: w for a, w in workers.items() if w.get("status") == "paused"}
    if not paused:
        return None
    try:
        running = client.run_on_scheduler(_running_elsewhere, keys=keys)
    except Exception:
        # A scheduler that cannot run our probe (Headwater not importable there): fall back to
        # the coarse rule, every worker paused.
        running = len(paused) < len(workers)
    if running:
        return None
    return ", ".join(
        f"{a} at {w.get('metrics', {}).get('memory', 0) / 1e6:.0f} of "
        f"{(w.get('memory_limit') or 0) / 1e6:.0f} MB"
        for a, w in sorted(paused.items())
    )


def _running_elsewhere(dask_scheduler: Any, keys: list[Any]) -> bool:
    """On the scheduler: is any unfinished task under `keys` running on a worker not paused?"""
    seen: set[Any] = set()
    stack = [dask_scheduler.tasks.get(k) for k in keys]
    while stack:
        ts = stack.pop()
        if ts is None or ts.key in seen or ts.state in ("memory", "erred", "forgotten"):
            continue
        seen.add(ts.key)
        worker = ts.processing_on
        if ts.state == "processing" and worker is not None and worker.status.name != "paused":
            return True
        stack.extend(ts.dependencies)
    return False
