"""The launcher's side of a PyTorchJob on Dask: where the replicas go, and the job that runs them.

`place` picks one worker per rank; `DaskJob` starts the replicas (rank 0 as a child of the
caller when it runs on rank 0's worker), relays their output, and stops them all when one
fails or they do not all start in time. The task each remote replica is lives in `_replica`;
the whole story is in `job`'s docstring.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater import config
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
    covered,
    distributed_module,
    pack,
    remote_replica,
    stop_all,
    target_path,
    write_spec,
)
from headwater.errors import ResourceError, UserError

__all__ = ["DaskJob", "place"]

#: How long remote replicas get to report back once stopped (after their SIGTERM grace).
_REMOTE_STOP_S = 10.0


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


def drop_topic(topic: str, dask_scheduler: Any = None) -> None:
    """On the scheduler: forget the job's log topic (it would keep its last lines)."""
    with contextlib.suppress(Exception):
        dask_scheduler._broker._topics.pop(topic, None)


class DaskJob:
    """One launch on the run's Dask cluster (see `job`'s docstring)."""

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
                client.run_on_scheduler(drop_topic, self.topic)
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
        full = {**os.environ, **env, "PYTHONPATH": python_path(os.environ.get("PYTHONPATH", ""))}
        try:
            self.local = ReplicaProcess(
                0,
                spec,
                full,
                prefixed(self.say),
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
        return replica_failure(rank, self.world, code, last, where)

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
