"""The run queue: at most N queued runs execute at once, each in a worker process.

The queue is the `kfp_runs` table, so it outlives the server. A dispatcher thread, every
`tick` seconds and whenever a run is submitted:

1. ends the runs whose worker exited: the Headwater run's own state (SUCCEEDED, FAILED) is
   taken; a run that was being terminated is CANCELED; a worker that died without ending
   its run (killed, or the machine rebooted) puts it back in the queue, to be resumed, at
   most `MAX_STARTS` times;
2. starts the oldest PENDING runs while fewer than N hold a worker.

Each start is claimed in the store first (PENDING -> RUNNING with a compare-and-set) and the
worker's pid written after, so a restarted server finds every run: queued ones start, and
RUNNING ones whose worker still runs are watched, those whose worker is gone are resumed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass

from headwater.processes import process_alive
from headwater.server.store import ACTIVE, KfpStore, Record
from headwater.server.worker import worker_argv

__all__ = ["MAX_STARTS", "QueueSettings", "RunQueue"]

#: Worker starts a run gets before a worker dying under it fails it.
MAX_STARTS = 3
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueSettings:
    """How the server executes runs (`headwater server` options)."""

    metadata_url: str
    max_concurrent_runs: int = 4
    executor: str = "local"
    scheduler: str | None = None
    install_packages: bool = True
    log_dir: str | None = None


class RunQueue:
    """The dispatcher thread over the `kfp_runs` queue (see the module docstring)."""

    def __init__(self, store: KfpStore, settings: QueueSettings, *, tick: float = 0.25) -> None:
        self.store = store
        self.settings = settings
        self.tick = tick
        self.host = socket.gethostname()
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="headwater-run-queue", daemon=True)

    def start(self) -> None:
        """Start dispatching (runs left by an earlier server first)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop dispatching; running workers go on (a later server adopts them)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def wake(self) -> None:
        """Dispatch now (a run was submitted, retried or terminated)."""
        self._wake.set()

    def terminate(self, run: Record) -> None:
        """Stop a run: a queued one is CANCELED at once; a running one's worker gets SIGTERM
        (its tasks are stopped) and the run is CANCELED when the worker has exited."""
        run_id = run["run_id"]
        if self.store.update_run(
            run_id, when=("PENDING",), state="CANCELED", finished_at=time.time()
        ):
            return
        if self.store.update_run(run_id, when=("RUNNING",), state="CANCELING"):
            pid = self.store.run(run_id)["worker_pid"]
            if pid and run.get("worker_host") in (None, self.host):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
        self.wake()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._dispatch()
            except Exception:  # a store hiccup must not stop the queue for good
                _log.exception("run queue: dispatch failed; retrying")
            self._wake.wait(self.tick)
            self._wake.clear()

    def _dispatch(self) -> None:
        self._fire(time.time())
        active = self.store.runs_in(ACTIVE)
        for run in active:
            if not self._worker_alive(run):
                self._ended(run)
        running = len(self.store.runs_in(ACTIVE))
        free = self.settings.max_concurrent_runs - running
        if free <= 0:
            return
        for run in self.store.runs_in(("PENDING",), limit=free):
            self._start(run)

    def _fire(self, now: float) -> None:
        """Queue a run of each recurring run whose time has come, unless `max_concurrency` of
        its runs are queued or running (it then fires when one ends). After downtime, each
        missed time fires in turn, or with `no_catchup` only the latest."""
        from headwater.metadata.schema import KFP_RUNS
        from headwater.server.schedule import trigger_of

        for rec in self.store.due_recurring_runs(now):
            rid, fire_at = rec["recurring_run_id"], rec["next_fire_at"]
            busy = self.store.count(
                KFP_RUNS,
                (KFP_RUNS.c.recurring_run_id == rid) & KFP_RUNS.c.state.in_(("PENDING", *ACTIVE)),
            )
            if busy >= rec["max_concurrency"]:
                continue
            trigger = trigger_of(rec["trigger"])
            following = trigger.next_after(now if rec["no_catchup"] else fire_at)
            if not self.store.update_recurring_run(rid, next_was=fire_at, next_fire_at=following):
                continue  # changed meanwhile (disabled, or fired by another server)
            stamp = time.strftime("%Y-%m-%d %H-%M-%S", time.gmtime(fire_at))
            self.store.create_run(
                {
                    "experiment_id": rec["experiment_id"],
                    "namespace": rec["namespace"],
                    "display_name": f"{rec['display_name']} {stamp}",
                    "description": rec["description"],
                    "pipeline_spec": rec["pipeline_spec"],
                    "pipeline_id": rec["pipeline_id"],
                    "pipeline_version_id": rec["pipeline_version_id"],
                    "runtime_config": rec["runtime_config"],
                    "scheduled_at": fire_at,
                    "recurring_run_id": rid,
                }
            )

    def _worker_alive(self, run: Record) -> bool:
        child = self._children.get(run["run_id"])
        if child is not None:
            if child.poll() is None:
                return True
            del self._children[run["run_id"]]
            return False
        if run["worker_host"] not in (None, self.host):
            return True  # another host's worker: only that host can tell
        if run["worker_pid"] is None:
            # Claimed but not started: a server that died between the two, or one starting
            # it right now (this thread alone starts workers, so not now).
            return False
        return process_alive(run["worker_pid"])

    def _ended(self, run: Record) -> None:
        from headwater.metadata import open_reader

        run_id = run["run_id"]
        run = self.store.run(run_id)  # as the worker left it (it may have set `error`)
        done = None
        reader = open_reader(self.settings.metadata_url)
        if reader is not None:
            done = reader.get_run(run_id)
        now = time.time()
        if run["state"] == "CANCELING":
            self.store.update_run(run_id, state="CANCELED", finished_at=now, worker_pid=None)
        elif done is not None and done.state in ("SUCCEEDED", "FAILED"):
            error = None
            if done.error:
                error = str(done.error.get("message") or done.error)
            self.store.update_run(
                run_id,
                when=("RUNNING",),
                state=done.state,
                finished_at=done.finished_at or now,
                error=error,
                worker_pid=None,
            )
        elif run["starts"] >= MAX_STARTS or (done is None and run["error"]):
            self.store.update_run(
                run_id,
                when=("RUNNING",),
                state="FAILED",
                finished_at=now,
                error=run["error"] or f"its worker stopped {run['starts']} times without ending it",
                worker_pid=None,
            )
        else:  # the worker died mid-run: queue it again, to be resumed
            self.store.update_run(run_id, when=("RUNNING",), state="PENDING", worker_pid=None)

    def _start(self, run: Record) -> None:
        run_id = run["run_id"]
        if not self.store.update_run(
            run_id,
            when=("PENDING",),
            state="RUNNING",
            worker_host=self.host,
            worker_pid=None,
            scheduled_at=run["scheduled_at"] or time.time(),
            starts=run["starts"] + 1,
        ):
            return
        s = self.settings
        argv = worker_argv(
            run_id,
            metadata_url=s.metadata_url,
            executor=s.executor,
            scheduler=s.scheduler,
            install_packages=s.install_packages,
        )
        log = open(os.devnull, "wb")  # noqa: SIM115 - handed to the child
        if s.log_dir is not None:
            os.makedirs(s.log_dir, exist_ok=True)
            log = open(os.path.join(s.log_dir, f"{run_id}.log"), "ab")  # noqa: SIM115
        with log:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the server; terminate signals it alone
            )
        self._children[run_id] = child
        self.store.update_run(run_id, worker_pid=child.pid)
