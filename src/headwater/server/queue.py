"""The run queue: at most N queued runs execute at once, each in a warm worker.

The queue is the `runs` table: a run is QUEUED from the moment it is accepted, so the queue
outlives the server. A dispatcher thread, every `tick` seconds and whenever a run is
submitted, terminated or retried:

1. queues a run of each recurring run whose time has come (`_fire`);
2. finds the runs whose worker died (its pid gone, or reused by another process: liveness is
   the pid and its start time) and puts them back in the queue to be resumed, at most
   `MAX_STARTS` times; a run that was being canceled is CANCELED;
3. hands the oldest QUEUED runs to the launcher (`server.launcher`) while fewer than N are
   running on this machine (servers sharing one machine share its N; each machine has its
   own). The worker that gets one takes it from the queue itself, in one conditional
   UPDATE that records its pid, start time and host: a run is never RUNNING without the
   process that runs it.

A restarted server finds every run: queued ones start, running ones whose worker still runs
are left to it, those whose worker is gone are resumed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue as queues
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

from headwater.config import METADATA_URL_ENV, TOKEN_ENV
from headwater.errors import StorageError, UserError
from headwater.metadata.base import ACTIVE_RUN_STATES, MetadataStore, Page, Predicate, RunRecord
from headwater.metadata.reconcile import engine_dead
from headwater.sandbox.policy import DEFAULT_UID
from headwater.server.operations import NewRun, RunOperations
from headwater.server.worker import WorkerSettings

__all__ = ["MAX_STARTS", "Launcher", "QueueSettings", "RunQueue"]

#: Worker starts a run gets before a worker dying under it fails it.
MAX_STARTS = 3
#: A run handed to a worker that has not taken it in this long is handed again.
_HAND_TIMEOUT_S = 60.0
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueSettings:
    """How the server executes runs (`headwater server` options)."""

    metadata_url: str
    max_concurrent_runs: int = 4
    executor: str = "local"
    scheduler: str | None = None
    install_packages: bool = True
    #: Which tasks run in their container images (None: `HEADWATER_CONTAINERS`, else auto).
    containers: str | None = None
    #: Where each run's worker writes its output (`RUN_ID.log`); None: the home's server-logs.
    log_dir: str | None = None
    #: How long the lease of this server's workers on their runs lasts unless renewed: a run
    #: held by a worker on another machine is taken over once its lease ends (its machine,
    #: or its connection to the store, is gone).
    lease_s: float = 30.0
    #: Which runs' tasks are sandboxed: "auto" (a multi-user server's), "always", "never".
    sandbox: str = "auto"
    #: The uid sandboxed tasks run as when the server runs as root.
    sandbox_uid: int = DEFAULT_UID
    #: Paths every sandboxed task may read; paths none may see (the token file).
    sandbox_read: tuple[str, ...] = ()
    sandbox_hidden: tuple[str, ...] = ()
    #: A trusted proxy names users: the server is multi-user whatever its store holds.
    trusted_proxy: bool = False

    @property
    def worker(self) -> WorkerSettings:
        """What each worker is told: hold a run's lease for `lease_s`."""
        return WorkerSettings(
            metadata_url=self.metadata_url,
            executor=self.executor,
            scheduler=self.scheduler,
            install_packages=self.install_packages,
            containers=self.containers,
            lease_s=self.lease_s,
            sandbox=self.sandbox,
            sandbox_uid=self.sandbox_uid,
            sandbox_read=self.sandbox_read,
            sandbox_hidden=self.sandbox_hidden,
            trusted_proxy=self.trusted_proxy,
        )


class Launcher:
    """The server's side of `server.launcher`: starts it, hands it runs, hears their workers
    end. Restarted by `ensure` if it dies."""

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings
        self.host = socket.gethostname()
        self._process: subprocess.Popen[bytes] | None = None
        self._events: queues.SimpleQueue[dict[str, Any]] = queues.SimpleQueue()

    def ensure(self) -> None:
        """Start the launcher unless it runs."""
        if self._process is not None and self._process.poll() is None:
            return
        if self._process is not None:
            _log.warning("run launcher exited (%s); starting another", self._process.returncode)
            self._events.put({"restarted": True})
        from headwater.config import home

        log_dir = self.settings.log_dir or str(home() / "server-logs")
        argv = [sys.executable, "-m", "headwater.server.launcher", *self.settings.worker.argv()]
        argv += ["--log-dir", log_dir]
        # The store's URL (its password) in the launcher's environment, never on a command
        # line; the server's own token nowhere (no worker needs it).
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        env[METADATA_URL_ENV] = self.settings.metadata_url
        self._process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=env
        )
        reader = threading.Thread(
            target=self._read, args=(self._process.stdout,), name="headwater-launcher", daemon=True
        )
        reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            with contextlib.suppress(ValueError):
                self._events.put(json.loads(line))

    def hand(self, run_id: str) -> bool:
        """Give the launcher a run; False if it cannot take it now."""
        process = self._process
        if process is None or process.stdin is None or process.poll() is not None:
            return False
        try:
            process.stdin.write((json.dumps({"run_id": run_id}) + "\n").encode())
            process.stdin.flush()
        except OSError:
            return False
        return True

    def events(self) -> list[dict[str, Any]]:
        """What the launcher reported since the last call."""
        found = []
        while True:
            try:
                found.append(self._events.get_nowait())
            except queues.Empty:
                return found

    def stop(self) -> None:
        """Close the launcher's stdin (it stops its spare and exits; workers go on)."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class RunQueue:
    """The dispatcher thread over the queued runs (see the module docstring)."""

    def __init__(
        self,
        store: MetadataStore,
        operations: RunOperations,
        settings: QueueSettings,
        *,
        tick: float = 0.25,
    ) -> None:
        self.store = store
        self.operations = operations
        self.settings = settings
        self.tick = tick
        self.launcher = Launcher(settings)
        #: Runs handed to a worker that has not taken them yet (run id -> when).
        self._handed: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="headwater-run-queue", daemon=True)

    def start(self) -> None:
        """Start the launcher and dispatching (runs left by an earlier server first)."""
        self.launcher.ensure()
        self._thread.start()

    def stop(self) -> None:
        """Stop dispatching; running workers go on (a later server finds them)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.launcher.stop()

    def wake(self) -> None:
        """Dispatch now (a run was submitted, retried or terminated)."""
        self._wake.set()

    def _loop(self) -> None:
        unreachable = ""  # the store's last error, said once until it answers again
        while not self._stop.is_set():
            try:
                self._dispatch()
                if unreachable:
                    _log.warning("run queue: the metadata store answers again")
                unreachable = ""
            except StorageError as exc:  # the database unreachable: one line, not each tick
                if str(exc) != unreachable:
                    _log.warning("run queue: %s; retrying every tick", exc)
                unreachable = str(exc)
            except Exception:  # anything else must not stop the queue for good either
                _log.exception("run queue: dispatch failed; retrying")
            self._wake.wait(self.tick)
            self._wake.clear()

    def _dispatch(self) -> None:
        self._fire(time.time())
        self._hear_launcher()
        active = 0
        for run in self.store.queue_runs(states=(*ACTIVE_RUN_STATES, "INTERRUPTED")):
            self._handed.pop(run.run_id, None)  # taken by its worker
            if run.state == "INTERRUPTED" or engine_dead(run):
                self._ended(run)
            elif self._lapsed(run):
                self._ended(run, lapsed=True)
            elif run.engine_host == self.launcher.host:
                active += 1  # the limit is this machine's: other machines' runs use theirs
        now = time.monotonic()
        for run_id, when in list(self._handed.items()):
            if now - when > _HAND_TIMEOUT_S:
                del self._handed[run_id]
        free = self.settings.max_concurrent_runs - active - len(self._handed)
        if free <= 0:
            return
        for run in self.store.queue_runs(states=("QUEUED",), limit=free + len(self._handed)):
            if free <= 0:
                break
            if run.run_id in self._handed:
                continue
            if not self.launcher.hand(run.run_id):
                return  # the launcher restarts on the next turn
            self._handed[run.run_id] = now
            free -= 1

    def _lapsed(self, run: RunRecord) -> bool:
        """True for a run held by a worker on another machine whose lease ended (one on this
        machine is judged by its pid and start time, `engine_dead`)."""
        if run.engine_host == self.launcher.host or run.lease_until is None:
            return False
        return time.time() > run.lease_until

    def _hear_launcher(self) -> None:
        """Forget runs whose worker ended before taking them (canceled meanwhile, or it
        failed to start): still QUEUED ones are handed again."""
        self.launcher.ensure()
        for event in self.launcher.events():
            if event.get("restarted"):
                self._handed.clear()
            elif "exit" in event:
                self._handed.pop(str(event["run_id"]), None)

    def _ended(self, run: RunRecord, *, lapsed: bool = False) -> None:
        """A run whose worker is gone (or, `lapsed`, whose worker's lease ended): CANCELED if
        it was being canceled, else back in the queue to be resumed, or FAILED after
        `MAX_STARTS` workers."""
        now = time.time()
        if run.state in ACTIVE_RUN_STATES:
            # RUNNING -> INTERRUPTED, CANCELING -> CANCELED; its running tasks FAILED. Not
            # if its worker renewed its lease since it was read.
            self.store.mark_interrupted(
                run.run_id,
                finished_at=now,
                engine_host=run.engine_host,
                engine_pid=run.engine_pid,
                lapsed_before=now if lapsed else None,
            )
            if run.state == "CANCELING":
                return
        if run.starts >= MAX_STARTS:
            self.store.transition_run(
                run.run_id,
                source=("INTERRUPTED",),
                to="FAILED",
                finished_at=now,
                error={
                    "error_type": "WorkerLost",
                    "message": f"its worker stopped {run.starts} times without ending it",
                },
            )
        else:
            self.store.transition_run(
                run.run_id, source=("INTERRUPTED",), to="QUEUED", finished_at=None
            )

    def _fire(self, now: float) -> None:
        """Queue a run of each recurring run whose time has come, unless `max_concurrency` of
        its runs are queued or running (it then fires when one ends). After downtime, each
        missed time fires in turn, or with `no_catchup` only the latest."""
        from headwater.server.schedule import trigger_of

        for rec in self.store.due_recurring_runs(now):
            rid, fire_at = rec.recurring_run_id, rec.next_fire_at
            busy = Page(
                where=(
                    Predicate("recurring_run_id", "EQUALS", rid),
                    Predicate("state", "IN", ["QUEUED", *ACTIVE_RUN_STATES]),
                ),
                limit=1,
            )
            if self.store.page("runs", busy)[1] >= rec.max_concurrency:
                continue
            trigger = trigger_of(rec.trigger)
            following = trigger.next_after(now if rec.no_catchup else (fire_at or now))
            if not self.store.update_recurring_run(rid, next_was=fire_at, next_fire_at=following):
                continue  # changed meanwhile (disabled, or fired by another server)
            if rec.no_catchup and fire_at is not None:
                fire_at = trigger.latest(fire_at, now)  # the one run stands for the latest
            stamp = time.strftime("%Y-%m-%d %H-%M-%S", time.gmtime(fire_at or now))
            config = rec.runtime_config
            try:
                self.operations.submit(
                    NewRun(
                        display_name=f"{rec.display_name} {stamp}",
                        version=self.store.get_version(rec.pipeline_version_id),
                        arguments=config.get("parameters") or {},
                        pipeline_root=config.get("pipeline_root") or "",
                        experiment_id=rec.experiment_id or "",
                        namespace=rec.namespace,
                        description=rec.description,
                        recurring_run_id=rid,
                        scheduled_at=fire_at,
                        created_by=rec.created_by,
                    )
                )
            except UserError as exc:  # its experiment archived, say: the next time may do
                _log.warning("recurring run %s could not queue a run: %s", rid, exc)
