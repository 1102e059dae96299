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
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from headwater import config
from headwater.components.torch._replica import (
    POLL_S,
    STOP_GRACE_S,
    ReplicaProcess,
    covered,
    distributed_module,
    pack,
    remote_replica,
    stop_all,
    target_path,
    write_spec,
)
from headwater.errors import InvalidArgumentError, ResourceError, UserError

__all__ = ["launch"]

#: How long remote replicas get to report back once stopped (after their SIGTERM grace).
_REMOTE_STOP_S = 10.0


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
            job = _DaskJob(address, target, kwargs, replicas, say)
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


def rendezvous_env(rank: int, world: int, master: str, port: int, threads: int) -> dict[str, str]:
    """The variables one replica sees (the operator's, plus threads and LOCAL_RANK)."""
    return {
        "MASTER_ADDR": master,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(world),
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }


def free_port() -> int:
    """A TCP port free on this host now (rank 0 binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _failure(rank: int, world: int, code: int | None, last: str, where: str = "") -> UserError:
    if code is None:
        how = "failed"
    elif code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
    else:
        how = f"failed (exit {code})"
    return UserError(
        f"replica {rank} of {world}{where} {how}: {last or '(no output)'}; the other "
        "replicas were stopped"
    )


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
                env["PYTHONPATH"] = _python_path(env.get("PYTHONPATH", ""))
                spec = write_spec(
                    Path(tmp) / f"rank-{rank}.json", target, kwargs, result if rank == 0 else None
                )
                try:
                    started.append(
                        ReplicaProcess(
                            rank, spec, env, _prefixed(say), lambda r, c: exits.put((r, c))
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
            raise _failure(failed.rank, replicas, failed.proc.returncode, failed.last_error_line())
        return json.loads(result.read_text())


def _python_path(existing: str) -> str:
    """PYTHONPATH for a local replica: what this process imports from, so the target imports
    there as it does here."""
    entries = [p for p in sys.path if p] + [p for p in existing.split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(entries))


def _prefixed(say: Callable[[str], None]) -> Callable[[int, str], None]:
    def on_line(rank: int, line: str) -> None:
        say(f"[rank {rank}] {line}")

    return on_line


# ---------------------------------------------------------------------------------------------
# Dask: the launcher's side (the task each remote replica is lives in `_replica`).


def place(
    workers: dict[str, dict[str, Any]],
    busy: dict[str, int],
    replicas: int,
    resources: dict[str, float],
    own: str | None,
) -> tuple[list[str], bool]:
    """The worker of each rank, and whether rank 0 is the caller's own worker (`own`).

    Workers whose declared resources cover `resources` qualify; the caller's own worker
    comes first when it qualifies, then the least busy ones.

    Args:
        workers: The scheduler's workers by address (`scheduler_info()["workers"]`).
        busy: Tasks processing on each worker.
        replicas: How many workers are needed.
        resources: What each replica needs of its worker.
        own: The caller's worker address, or None.

    Raises:
        ResourceError: Fewer qualifying workers than replicas (naming those there are).
    """
    fits = sorted(
        (
            a
            for a, w in workers.items()
            if all(float((w.get("resources") or {}).get(k, 0)) >= v for k, v in resources.items())
        ),
        key=lambda a: (a != own, busy.get(a, 0), a),
    )
    if len(fits) < replicas:
        found = ", ".join(fits) or "none"
        if resources:
            raise ResourceError(
                f"pytorch_job needs {replicas} workers with {resources} each; the cluster has "
                f"{len(fits)} such workers ({found}); add workers, or lower replicas"
            )
        raise ResourceError(
            f"pytorch_job needs {replicas} workers, one per replica; the cluster has "
            f"{len(fits)} ({found}); add workers, or lower replicas"
        )
    chosen = fits[:replicas]
    return chosen, own is not None and chosen[0] == own


def _drop_topic(topic: str, dask_scheduler: Any = None) -> None:
    """On the scheduler: forget the job's log topic (it would keep its last lines)."""
    with contextlib.suppress(Exception):
        dask_scheduler._broker._topics.pop(topic, None)


class _DaskJob:
    """One launch on the run's Dask cluster (see the module's docstring)."""

    def __init__(
        self,
        address: str,
        target: str,
        kwargs: dict[str, Any],
        world: int,
        say: Callable[[str], None],
    ) -> None:
        self.address = address
        self.target = target
        self.kwargs = kwargs
        self.world = world
        self.say = say
        self.job = uuid.uuid4().hex[:12]
        self.topic = f"headwater-job-{self.job}"
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.started: set[int] = set()
        self.workers: list[str] = []
        self.futures: dict[int, Any] = {}
        self.local: ReplicaProcess | None = None
        self.heard: set[int] = set()  # ranks whose output lines arrived

    def run(
        self,
        files: list[str],
        threads: int | None,
        resources: dict[str, float],
        start_timeout_s: float,
    ) -> Any:
        distributed = distributed_module()
        try:
            client = distributed.Client(self.address, timeout=10, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise UserError(
                f"cannot reach the run's Dask scheduler at {self.address} ({exc}); is the "
                f"cluster still up? (unset {config.DASK_SCHEDULER_ENV} to run the replicas here)"
            ) from exc
        stop = distributed.Event(f"{self.topic}-stop", client=client)
        try:
            return self._run(client, stop, files, threads, resources, start_timeout_s)
        finally:
            with contextlib.suppress(Exception):
                client.unsubscribe_topic(self.topic)
            with contextlib.suppress(Exception):
                client.run_on_scheduler(_drop_topic, self.topic)
            with contextlib.suppress(Exception):
                if all(f.done() for f in self.futures.values()):
                    stop.clear()  # forgets the event on the scheduler
            client.close()

    def _run(
        self,
        client: Any,
        stop: Any,
        files: list[str],
        threads: int | None,
        resources: dict[str, float],
        start_timeout_s: float,
    ) -> Any:
        from distributed.comm.addressing import get_address_host

        info = client.scheduler_info(n_workers=-1)["workers"]
        busy = {a: len(keys) for a, keys in client.processing().items()}
        own = config.dask_worker()
        self.workers, local_rank0 = place(info, busy, self.world, resources, own)
        first = self.workers[0]
        master = get_address_host(first)
        port = free_port() if local_rank0 else int(client.run(free_port, workers=[first])[first])
        cpu = int(resources.get("CPU", 0))
        per = [threads or cpu or int(info[w].get("nthreads") or 1) for w in self.workers]
        envs = [rendezvous_env(r, self.world, master, port, per[r]) for r in range(self.world)]
        self.say(
            f"[job] {self.world} replicas on {', '.join(self.workers)}"
            f"{' (rank 0 here)' if local_rank0 else ''}; master {master}:{port}"
        )
        remote = list(range(1 if local_rank0 else 0, self.world))
        shipped = list(files)
        code = target_path(self.target)
        if code is not None and not covered(code, shipped):
            shipped.append(code)
        blob = None
        if remote and shipped:
            [blob] = client.scatter(
                [pack(shipped)],
                workers=[self.workers[r] for r in remote],
                broadcast=True,
                hash=False,
            )
        client.subscribe_topic(self.topic, lambda event: self.inbox.put(event[1]))
        deadline = time.monotonic() + start_timeout_s
        with tempfile.TemporaryDirectory(prefix="headwater-job-") as tmp:
            result = Path(tmp) / "result.json"
            stopped = False
            try:
                for rank in remote:
                    self._submit(client, rank, envs[rank], shipped, blob, resources)
                if local_rank0:
                    self._start_local(envs[0], Path(tmp), result)
                failure = self._wait(deadline, start_timeout_s, client)
                if failure is not None:
                    stopped = True
                    self._stop(client, stop)
            except BaseException:
                if not stopped:
                    self._stop(client, stop)
                raise
            finally:
                if self.local is not None:  # also what it left running in its group
                    stop_all([self.local], STOP_GRACE_S)
            self._drain()
            if failure is not None:
                raise self._failure()
            text = result.read_text() if local_rank0 else self.futures[0].result()["result"]
            if text is None:
                raise UserError(f"replica 0 on {first} exited 0 without its return value")
            return json.loads(text)

    def _submit(
        self,
        client: Any,
        rank: int,
        env: dict[str, str],
        files: list[str],
        blob: Any,
        resources: dict[str, float],
    ) -> None:
        spec = {
            "job": self.job,
            "rank": rank,
            "topic": self.topic,
            "stop": f"{self.topic}-stop",
            "target": self.target,
            "kwargs": self.kwargs,
            "files": files,
            "env": env,
        }
        future = client.submit(
            remote_replica,
            spec,
            blob,
            key=f"{self.topic}-rank-{rank}",
            workers=[self.workers[rank]],
            allow_other_workers=False,
            pure=False,
            resources=resources or None,
        )
        future.add_done_callback(lambda _: self.inbox.put({"rank": rank, "done": True}))
        self.futures[rank] = future

    def _start_local(self, env: dict[str, str], tmp: Path, result: Path) -> None:
        spec = write_spec(tmp / "rank-0.json", self.target, self.kwargs, result)
        full = {**os.environ, **env, "PYTHONPATH": _python_path(os.environ.get("PYTHONPATH", ""))}
        try:
            self.local = ReplicaProcess(
                0,
                spec,
                full,
                _prefixed(self.say),
                lambda r, c: self.inbox.put({"rank": r, "done": True}),
            )
        except OSError as exc:
            raise UserError(f"replica 0 of {self.world} could not start here: {exc}") from exc
        self.started.add(0)

    def _wait(self, deadline: float, timeout_s: float, client: Any) -> int | None:
        """Until every replica ended (None) or one failed (its rank).

        Raises:
            ResourceError: Not all replicas started by `deadline`.
        """
        ended: set[int] = set()
        while len(ended) < self.world:
            with contextlib.suppress(queue.Empty):
                self._handle(self.inbox.get(timeout=POLL_S))
            for rank in range(self.world):
                if rank in ended or not self._done(rank):
                    continue
                ended.add(rank)
                self.started.add(rank)
                if not self._succeeded(rank):
                    return rank
            if len(self.started) < self.world and time.monotonic() > deadline:
                raise self._not_started(timeout_s, client)
        return None

    def _handle(self, message: dict[str, Any]) -> None:
        rank = int(message.get("rank", -1))
        if "started" in message:
            self.started.add(rank)
        for line in message.get("lines", ()):
            self.heard.add(rank)
            self.say(f"[rank {rank}] {line}")

    def _drain(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                self._handle(self.inbox.get_nowait())

    def _done(self, rank: int) -> bool:
        if rank in self.futures:
            return bool(self.futures[rank].done())
        return self.local is not None and self.local.proc.poll() is not None

    def _succeeded(self, rank: int) -> bool:
        if rank not in self.futures:
            return self.local is not None and self.local.proc.returncode == 0
        future = self.futures[rank]
        return bool(future.status == "finished" and future.result()["exit"] == 0)

    def _outcome(self, rank: int) -> tuple[int | None, str, float, bool] | None:
        """(exit code, last line, end time, stopped by the job) of an ended replica."""
        if rank not in self.futures:
            local = self.local
            if local is None or local.proc.returncode is None:
                return None
            ended = local.ended_at or time.time()
            return local.proc.returncode, local.last_error_line(), ended, local.stopped
        future = self.futures[rank]
        if future.status == "finished":
            found = future.result()
            return found["exit"], found["last"], float(found["ended"]), bool(found["stopped"])
        if future.status == "error":
            exc = future.exception()
            return None, f"{type(exc).__name__}: {exc}".splitlines()[0], time.time(), False
        return None

    def _failure(self) -> UserError:
        """The error of the replica that failed first on its own."""
        failed = []
        for rank in range(self.world):
            outcome = self._outcome(rank)
            if outcome is not None and outcome[0] != 0 and not outcome[3]:
                failed.append((outcome[2], rank, outcome))
        if not failed:
            return UserError(f"the job's replicas were stopped ({self.world} on {self.workers})")
        _, rank, (code, last, _, _) = min(failed)
        where = "" if rank not in self.futures else f" on {self.workers[rank]}"
        if rank in self.futures and rank not in self.heard:  # its streamed lines were lost
            found = self.futures[rank].result() if self.futures[rank].status == "finished" else {}
            for line in found.get("tail", ()):
                self.say(f"[rank {rank}] {line}")
        return _failure(rank, self.world, code, last, where)

    def _not_started(self, timeout_s: float, client: Any) -> ResourceError:
        waiting = [r for r in range(self.world) if r not in self.started]
        busy: Any = {}
        with contextlib.suppress(Exception):  # the message does without it
            busy = client.processing(workers=[self.workers[r] for r in waiting])
        ours = {f.key for f in self.futures.values()}
        parts = []
        for rank in waiting:
            worker = self.workers[rank]
            others = [k for k in busy.get(worker, ()) if k not in ours]
            parts.append(f"rank {rank} on {worker} ({len(others)} other task(s) running there)")
        which = "replica" if len(waiting) == 1 else "replicas"
        return ResourceError(
            f"{which} {', '.join(map(str, waiting))} of {self.world} did not start within "
            f"{timeout_s:g} s: {'; '.join(parts)}; the workers are busy: free them, or raise "
            f"{config.DDP_START_TIMEOUT_ENV}; the other replicas were stopped"
        )

    def _stop(self, client: Any, stop: Any) -> None:
        """Stop every replica: the job's event for remote ones, signals for ours; wait (a
        while) for remote ones to report back."""
        with contextlib.suppress(Exception):
            stop.set()
        if self.local is not None:
            stop_all([self.local], STOP_GRACE_S)
        queued = [f for r, f in self.futures.items() if r not in self.started and not f.done()]
        with contextlib.suppress(Exception):
            client.cancel(queued)
        running = [f for f in self.futures.values() if not f.done()]
        deadline = time.monotonic() + STOP_GRACE_S + _REMOTE_STOP_S
        while running and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                self._handle(self.inbox.get(timeout=POLL_S))
            running = [f for f in running if not f.done()]
        with contextlib.suppress(Exception):
            client.cancel(running)
