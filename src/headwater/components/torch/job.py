"""The PyTorchJob equivalent: N replicas of a training function, rendezvoused, here or on Dask.

`launch(target, kwargs, replicas)` starts `replicas` processes at once, as the Kubeflow
training operator starts a PyTorchJob's pods: each sees MASTER_ADDR and MASTER_PORT (rank 0's
host and a free port there), WORLD_SIZE, RANK, LOCAL_RANK=0 (one process per replica) and
PYTHONUNBUFFERED=1, so `torch.distributed.init_process_group()` needs no arguments. Each
replica is `python -m headwater.components.torch._replica`, which imports the target, calls it
with `kwargs`, and (rank 0) hands back its JSON return value.

Where the replicas run:

- Locally (no HEADWATER_DASK_SCHEDULER): on this machine, master 127.0.0.1, each with
  cpu_count // replicas threads (OMP_NUM_THREADS and torch's intra-op threads).
- On Dask (a task under `headwater run --executor dask` gets HEADWATER_DASK_SCHEDULER): one
  replica per worker, on workers whose declared resources cover `resources`. Rank 0 runs on
  the caller's own worker (HEADWATER_DASK_WORKER) as a child of the caller when that worker
  qualifies, so rank 0's outputs land beside the caller (launched from outside the cluster,
  rank 0 runs on a worker, and what it writes stays there); every other replica is a Dask
  task pinned to its worker that starts the replica process there. Workers share no filesystem:
  `files` travel as one tar scattered to those workers and unpacked in their scratch space,
  and the strings in `kwargs` (and a file target) naming them are rewritten to the copies.
  Output lines come back as Dask events on a topic of the job; the tail of a failed replica's
  output also comes back with its task's result.

All or nothing: the first replica to fail stops the others (SIGTERM, then SIGKILL, to their
process groups; on Dask through a job-wide `distributed.Event`) and `launch` raises within
seconds, instead of leaving the peers blocked in a collective for gloo's 30-minute timeout. A
launcher interrupted (KeyboardInterrupt, SIGTERM) stops its replicas first, and a replica
whose parent died kills itself. On Dask, replicas not all started within the start timeout
(HEADWATER_DDP_START_TIMEOUT, default 120 s; busy workers) stop the job the same way.

The Dask side lives in `_dask_job`; what every replica starts with (the rendezvous variables,
the master port, the failure message) in `_rendezvous`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from headwater import config
from headwater.components.torch._dask_job import DaskJob
from headwater.components.torch._rendezvous import (
    free_port,
    prefixed,
    python_path,
    rendezvous_env,
    replica_failure,
)
from headwater.components.torch._replica import (
    POLL_S,
    STOP_GRACE_S,
    ReplicaProcess,
    stop_all,
    target_path,
    write_spec,
)
from headwater.errors import InvalidArgumentError, UserError

__all__ = ["launch"]


def launch(
    target: str,
    kwargs: dict[str, Any],
    replicas: int,
    *,
    files: Sequence[str] = (),
    threads_per_replica: int | None = None,
    resources: dict[str, float] | None = None,
    start_timeout_s: float | None = None,
    log: Callable[[str], None] | None = None,
) -> Any:
    """Run `target` ("pkg.module:function", or "path/to/file.py:function") in `replicas`
    processes at once, each with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK (as the Kubeflow
    training operator sets them: one process per replica, master = rank 0) plus
    PYTHONUNBUFFERED=1, and return rank 0's return value (JSON-serialisable). kwargs are
    passed to the function as keyword arguments in every replica.

    Args:
        target: The function every replica calls.
        kwargs: Its keyword arguments (JSON-serialisable), the same in every replica.
        replicas: How many processes (the world size).
        files: Input files or directories the replicas read. On Dask they travel to the
            workers (in memory, as one tar: code and datasets up to a few hundred MB; larger
            data belongs in object storage) and the strings in `kwargs` that name them (or
            paths under them) are rewritten to the copies; a file target travels too.
        threads_per_replica: CPU threads per replica (default: cpu_count // replicas here;
            on Dask, `resources["CPU"]` or the worker's threads).
        resources: What each replica needs of its Dask worker ({"GPU": 1}, {"CPU": 4}).
            Locally, a GPU request gives each replica its own GPUs (CUDA_VISIBLE_DEVICES)
            when the machine has enough.
        start_timeout_s: On Dask, how long the replicas may take to start (all of them);
            default HEADWATER_DDP_START_TIMEOUT, else 120.
        log: Called with each output line of each replica, prefixed "[rank i] " (default:
            print to stdout); from other threads.

    Returns:
        Rank 0's return value.

    Raises:
        InvalidArgumentError: `replicas` below 1, a malformed target, or kwargs that are not
            JSON-serialisable.
        ResourceError: The Dask cluster has too few workers with `resources`, or the
            replicas did not all start in time.
        UserError: A replica failed (the message names its rank, exit code and last line of
            output; the others were stopped), or an input file does not exist.
    """
    _check(target, kwargs, replicas, threads_per_replica, files)
    say = _locked(log or _print)
    address = config.dask_scheduler()
    with _sigterm_exits():
        if address:
            timeout = (
                start_timeout_s if start_timeout_s is not None else config.ddp_start_timeout_s()
            )
            job = DaskJob(address, target, kwargs, replicas, say)
            return job.run(list(files), threads_per_replica, dict(resources or {}), timeout)
        return _run_local(target, kwargs, replicas, threads_per_replica, resources or {}, say)


def _check(
    target: str,
    kwargs: dict[str, Any],
    replicas: int,
    threads: int | None,
    files: Sequence[str],
) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise InvalidArgumentError(
            f"replicas must be a whole number >= 1 (got {replicas!r}); 1 runs the function in "
            "one process"
        )
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise InvalidArgumentError(f"threads_per_replica must be a whole number (got {threads!r})")
    if threads is not None and threads < 1:
        raise InvalidArgumentError(f"threads_per_replica must be >= 1 (got {threads!r})")
    module, _, name = target.strip().rpartition(":")
    if not module or not name:
        raise InvalidArgumentError(
            f"target {target!r} names no function: give 'package.module:function' or "
            "'path/to/file.py:function'"
        )
    path = target_path(target)
    if path is not None and not os.path.exists(path):
        raise InvalidArgumentError(f"target {target!r}: the file {path!r} does not exist")
    try:
        json.dumps(kwargs)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"kwargs must be JSON-serialisable, as they travel to each replica ({exc}); pass "
            "paths, numbers, strings, lists and dicts"
        ) from exc
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise UserError(f"input files of the job do not exist: {', '.join(map(repr, missing))}")


def _print(line: str) -> None:
    print(line, flush=True)


def _locked(log: Callable[[str], None]) -> Callable[[str], None]:
    """`log`, called by one thread at a time (replicas' lines never interleave mid-line)."""
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            log(line)

    return say


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """Turn SIGTERM into SystemExit while launching, so the replicas are stopped on the way
    out; then deliver it again as the process's own handler would take it."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if in_main else None
    if not in_main or previous in (signal.SIG_IGN, None):
        yield
        return
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        if not received:  # once: a second SIGTERM must not cut the cleanup short
            received.append(signum)
            raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if received and previous is signal.SIG_DFL:
            signal.raise_signal(signal.SIGTERM)


def _first_failure(replicas: Sequence[ReplicaProcess]) -> ReplicaProcess | None:
    """The replica that failed first on its own (not one `stop_all` ended)."""
    failed = [r for r in replicas if not r.stopped and r.proc.returncode not in (0, None)]
    return min(failed, key=lambda r: r.ended_at or 0.0, default=None)


def _local_gpus(
    replicas: int, resources: dict[str, float], say: Callable[[str], None]
) -> list[str]:
    """CUDA_VISIBLE_DEVICES for each rank when each asks for GPUs and there are enough."""
    wanted = int(-(-float(resources.get("GPU", 0)) // 1))
    if wanted <= 0:
        return []
    from headwater.machine import detect_gpus

    gpus = detect_gpus()
    if len(gpus) < wanted * replicas:
        say(
            f"[job] {replicas} replicas ask for {wanted} GPU(s) each but this machine has "
            f"{len(gpus)}: they share what there is"
        )
        return []
    return [",".join(gpus[r * wanted : (r + 1) * wanted]) for r in range(replicas)]


def _run_local(
    target: str,
    kwargs: dict[str, Any],
    replicas: int,
    threads: int | None,
    resources: dict[str, float],
    say: Callable[[str], None],
) -> Any:
    from headwater.machine import machine_cpus

    per = threads or max(1, machine_cpus() // replicas)
    gpus = _local_gpus(replicas, resources, say)
    port = free_port()
    exits: queue.Queue[tuple[int, int]] = queue.Queue()
    started: list[ReplicaProcess] = []
    with tempfile.TemporaryDirectory(prefix="headwater-job-") as tmp:
        result = Path(tmp) / "result.json"
        try:
            for rank in range(replicas):
                env = {**os.environ, **rendezvous_env(rank, replicas, "127.0.0.1", port, per)}
                if gpus:
                    env["CUDA_VISIBLE_DEVICES"] = gpus[rank]
                env["PYTHONPATH"] = python_path(env.get("PYTHONPATH", ""))
                spec = write_spec(
                    Path(tmp) / f"rank-{rank}.json", target, kwargs, result if rank == 0 else None
                )
                try:
                    started.append(
                        ReplicaProcess(
                            rank, spec, env, prefixed(say), lambda r, c: exits.put((r, c))
                        )
                    )
                except OSError as exc:
                    raise UserError(
                        f"replica {rank} of {replicas} could not start: {exc}; the other "
                        "replicas were stopped"
                    ) from exc
            ended = 0
            while ended < replicas:
                with contextlib.suppress(queue.Empty):
                    _, code = exits.get(timeout=POLL_S)
                    ended += 1
                    if code != 0:
                        break
        finally:
            stop_all(started, STOP_GRACE_S)
        failed = _first_failure(started)
        if failed is not None:
            raise replica_failure(
                failed.rank, replicas, failed.proc.returncode, failed.last_error_line()
            )
        return json.loads(result.read_text())
