"""The worker side of `DaskExecutor`: a warm fork server on each Dask worker, a task per fork.

A Dask task of Headwater's is `run_attempt(launch, ...)`: it runs one attempt of one KFP task
as its own process, forked from the worker's fork server (the same one `LocalExecutor` uses,
kept warm by `HeadwaterPlugin`), and returns the attempt's outcome in-band as a `TaskResult`:
outputs (parameter values, artifact URIs), or a structured error; and where its log went.
Nothing of it is left on the worker's disk: the task runs in the worker's scratch space, its
artifacts go to the pipeline root and its log beside its outputs there.

Nothing of it outlives its engine either. The engine's lease on an attempt is its Dask task:
while the engine's client is connected, the scheduler keeps the task wanted; when the client
leaves (the engine exited, crashed or was SIGKILLed: its connection closes at once; its
host vanished: Dask's TCP timeout, `distributed.comm.timeouts.tcp`, 30 s by default) or
cancels, the scheduler releases it, and this worker marks it cancelled, though its thread
still runs. `HeadwaterPlugin` looks every `LEASE_CHECK_S` for attempts whose task is no
longer wanted and stops their process groups. The lease needs no message of its own: an
engine that is slow, paused in a GC or suspended (Ctrl-Z) keeps its connection, and so its
tasks, however long it takes.

This module is imported on workers (which have Headwater and `distributed` installed) and by
`DaskExecutor`; nothing else imports it, so `distributed` stays optional.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import threading
from collections import defaultdict
from collections.abc import Collection, Hashable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from distributed import WorkerPlugin

from headwater import config
from headwater.errors import HeadwaterError, HeadwaterSystemError
from headwater.task import Launch, TaskError, TaskResult

#: The name the plugin is registered under on every worker.
PLUGIN = "headwater"
#: Logs up to this size also travel back with the result (the engine then needs no fetch).
INLINE_LOG_BYTES = 256 * 1024
#: Seconds between two looks for attempts whose engine gave them up (see the module docstring).
LEASE_CHECK_S = 1.0
#: The worker's periodic callback that looks.
_WATCH = "headwater-lease"
#: Worker task states of a task the scheduler released while its thread still runs.
_RELEASED = frozenset({"cancelled", "released", "forgotten"})

T = TypeVar("T")


class TaskHost:
    """One fork server on this worker, shared by the worker's threads.

    Each Dask thread that runs a task blocks in `run` until its task process ended; a pump
    thread reads the fork server's reports and hands each result to its waiting thread. Only
    the pump stops task processes (`cancel` and `abandon` hand them to it), so no two threads
    ever work the fork server's reports at once.
    """

    def __init__(self, *, sandboxed: bool = False) -> None:
        from headwater.executors.local import LocalExecutor

        # A host of sandboxed tasks has a fork server of its own, without the worker's secrets.
        self._executor = LocalExecutor(sandboxed=sandboxed)
        self._lock = threading.Lock()
        self._waiting: dict[int, Future[TaskResult]] = {}
        self._runs: defaultdict[str, set[int]] = defaultdict(set)
        self._keys: dict[Hashable, int] = {}  # the Dask task of each attempt -> its number
        self._stopping: dict[int, str] = {}  # attempts the pump is to stop -> why
        self._ids = itertools.count(1)
        self._wake = threading.Event()
        self._closed = False
        self._pump_thread = threading.Thread(target=self._pump, name="headwater-host", daemon=True)
        self._pump_thread.start()

    def run(self, launch: Launch, run_key: str, dask_key: Hashable = None) -> TaskResult:
        """Run one attempt to its end and return its result (`launch.task_id` kept).

        Args:
            launch: The attempt.
            run_key: The run it belongs to (`cancel` stops a run's attempts).
            dask_key: The Dask task running it, if any (`abandon` stops an attempt by it).
        """
        number = next(self._ids)
        waiter: Future[TaskResult] = Future()
        with self._lock:
            if self._closed:
                raise HeadwaterSystemError("the worker is closing; the attempt did not start")
            self._waiting[number] = waiter
            self._runs[run_key].add(number)
            if dask_key is not None:
                self._keys[dask_key] = number
            self._executor.submit(dataclasses.replace(launch, task_id=number))
        self._wake.set()
        try:
            result = waiter.result()
        finally:
            with self._lock:
                self._waiting.pop(number, None)
                self._runs[run_key].discard(number)
                if not self._runs[run_key]:
                    self._runs.pop(run_key, None)
                if dask_key is not None:
                    self._keys.pop(dask_key, None)
        result.task_id = launch.task_id
        return result

    def dask_keys(self) -> list[Hashable]:
        """The Dask tasks of the attempts running here."""
        with self._lock:
            return list(self._keys)

    def abandon(self, dask_keys: Collection[Hashable]) -> None:
        """Stop the attempts run by `dask_keys`, whose engine gave them up (soon, not now)."""
        why = "its engine is gone: the Dask scheduler released its task"
        with self._lock:
            for key in dask_keys:
                if key in self._keys:
                    self._stopping.setdefault(self._keys[key], why)
        self._wake.set()

    def _pump(self) -> None:
        while not self._closed:
            self._stop_wanted()
            if self._executor.running() == 0:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            try:
                results = self._executor.wait(0.5)
            except HeadwaterSystemError as exc:  # the fork server died: every waiter fails
                self._fail_all(str(exc))
                return
            for result in results:
                with self._lock:
                    waiter = self._waiting.get(result.task_id)
                if waiter is not None and not waiter.done():
                    waiter.set_result(result)

    def _fail_all(self, why: str) -> None:
        with self._lock:
            waiters = list(self._waiting.items())
        for number, waiter in waiters:
            if not waiter.done():
                waiter.set_result(TaskResult(number, error=TaskError("", "WorkerError", why)))

    def cancel(self, run_key: str) -> int:
        """Stop every task process of `run_key` on this worker (soon, not now; the pump does
        it); return how many there are."""
        with self._lock:
            numbers = set(self._runs.pop(run_key, ()))
            for number in numbers:
                self._stopping.setdefault(number, "the engine cancelled the task")
        self._wake.set()
        return len(numbers)

    def _stop_wanted(self) -> None:
        """Stop the attempts `cancel` and `abandon` asked for: their process groups, SIGTERM
        then SIGKILL (see `LocalExecutor.cancel`); their waiting threads get an error."""
        with self._lock:
            if not self._stopping:
                return
            stopping, self._stopping = self._stopping, {}
        self._executor.cancel(set(stopping))
        for number, why in stopping.items():
            with self._lock:
                waiter = self._waiting.get(number)
            if waiter is not None and not waiter.done():
                waiter.set_result(TaskResult(number, error=TaskError("", "Interrupted", why)))

    def close(self) -> None:
        """Stop the fork server and every task still running."""
        with self._lock:
            self._closed = True
        self._fail_all("the Dask worker is shutting down")
        self._executor.shutdown(kill=True)


class HeadwaterPlugin(WorkerPlugin):
    """A Dask worker plugin that keeps a warm fork server on each worker.

    Registered by the engine (`Client.register_plugin`), on the workers there and on any that
    join later. Workers need Headwater installed (`pip install 'headwater[dask]'`).
    """

    name = PLUGIN
    idempotent = True  # registered again by each engine: keep the first, and its warm server

    def __init__(self) -> None:
        #: The fork servers of this worker: for tasks run as they are, and for sandboxed ones.
        self.hosts: dict[bool, TaskHost] = {}
        self._lock = threading.Lock()

    def setup(self, worker: Any) -> None:
        self.get_host()
        self.watch(worker)

    def teardown(self, worker: Any) -> None:
        watch = worker.periodic_callbacks.pop(_WATCH, None)
        if watch is not None:
            watch.stop()
        for host in list(self.hosts.values()):
            host.close()

    def watch(self, worker: Any) -> None:
        """Look every `LEASE_CHECK_S` for attempts whose engine gave them up, and stop them.

        Runs on the worker's event loop, as the look does: it reads the worker's task states.
        """
        from tornado.ioloop import PeriodicCallback

        if _WATCH in worker.periodic_callbacks:
            return
        watch = PeriodicCallback(lambda: self._look(worker), LEASE_CHECK_S * 1000)
        worker.periodic_callbacks[_WATCH] = watch  # the worker stops it when it closes
        watch.start()

    def _look(self, worker: Any) -> None:
        for host in list(self.hosts.values()):
            given_up = [key for key in host.dask_keys() if not _still_wanted(worker, key)]
            if given_up:
                host.abandon(given_up)

    def get_host(self, *, sandboxed: bool = False) -> TaskHost:
        """The fork server for tasks run as they are, or sandboxed (made on first use)."""
        with self._lock:
            if sandboxed not in self.hosts:
                self.hosts[sandboxed] = TaskHost(sandboxed=sandboxed)
            return self.hosts[sandboxed]

    def __getstate__(self) -> dict[str, Any]:
        return {}  # what travels to workers: nothing but the class

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


def _plugin(worker: Any) -> HeadwaterPlugin:
    plugin = worker.plugins.get(PLUGIN)
    if not isinstance(plugin, HeadwaterPlugin):  # not registered yet on this worker: be it
        plugin = HeadwaterPlugin()
        worker.plugins[PLUGIN] = plugin
        worker.loop.add_callback(plugin.watch, worker)
    return plugin


def _still_wanted(worker: Any, key: Hashable) -> bool:
    """False once the scheduler released the Dask task `key` (its engine gave it up)."""
    task = worker.state.tasks.get(key)
    return task is not None and task.state not in _RELEASED


def run_attempt(
    launch: Launch, run_key: str, log_uri: str | None, install_packages: bool
) -> TaskResult:
    """Run one attempt on this worker; the Dask task of `DaskExecutor`.

    The attempt runs in this worker's scratch space (its `local_directory`), its
    `packages_to_install` are resolved in this worker's environment, and its log is stored at
    `log_uri` (beside its outputs under the pipeline root) once it ended.
    """
    from distributed import get_worker

    worker = get_worker()
    scratch = Path(worker.local_directory) / "headwater" / run_key / launch.workdir.name
    local = relocate(launch, scratch)
    # The task's own Dask work (`headwater.compute.get_client()`) goes to this cluster, and
    # a PyTorchJob it launches puts rank 0 on this worker, beside the task.
    env = {
        **local.env,
        config.DASK_SCHEDULER_ENV: str(worker.scheduler.address),
        config.DASK_WORKER_ENV: str(worker.address),
    }
    if launch.sandbox is not None:
        # A sandboxed task's Dask work stays in its sandbox (a cluster of its own there): the
        # run's cluster runs outside any sandbox, and may require credentials it does not have.
        env.pop(config.DASK_SCHEDULER_ENV)
        env.pop(config.DASK_WORKER_ENV)
    local = dataclasses.replace(local, env=env)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(local.log_path)
    try:
        result = _run_here(worker, local, run_key, install_packages, worker.get_current_task())
        result.worker = worker.address
        if log_uri and os.path.exists(local.log_path):
            _store_log(launch, str(local.log_path), log_uri)
            result.log_uri = log_uri
            if os.path.getsize(local.log_path) <= INLINE_LOG_BYTES:
                with open(local.log_path, "rb") as fh:
                    result.log_bytes = fh.read(INLINE_LOG_BYTES)
    finally:
        _discard(scratch)
    if result.error is not None:
        result.error.task = launch.name
        result.error.log_path = str(launch.log_path)
    return result


def _discard(scratch: Path) -> None:
    """Remove an attempt's scratch directory, off the path of its result (a thread)."""
    threading.Thread(
        target=shutil.rmtree, args=(scratch,), kwargs={"ignore_errors": True}, daemon=True
    ).start()


def _run_here(
    worker: Any, launch: Launch, run_key: str, install: bool, dask_key: Hashable
) -> TaskResult:
    try:
        python_path = _packages(launch, install)
    except HeadwaterError as exc:
        error = TaskError(launch.name, type(exc).__name__, f"on {worker.address}: {exc}")
        return TaskResult(launch.task_id, error=error, retryable=False)
    if python_path:
        launch = dataclasses.replace(launch, python_path=python_path)
    sandboxed = launch.sandbox is not None and launch.in_image is None
    return _plugin(worker).get_host(sandboxed=sandboxed).run(launch, run_key, dask_key)


def _packages(launch: Launch, install: bool) -> tuple[str, ...]:
    from headwater.executors.packages import python_path_for

    if launch.in_image is not None:
        return ()  # installed in its image, where it runs (`executors.in_image`)
    if launch.sandbox is None:
        return python_path_for(launch.container, install=install)
    # A sandboxed run's packages are its namespace's, installed by a sandboxed pip.
    scope = launch.placeholders.pipeline_root
    return python_path_for(launch.container, install=install, scope=scope, sandbox=launch.sandbox)


def _store_log(launch: Launch, local: str, uri: str) -> None:
    root = launch.placeholders.pipeline_root
    store = _stores.get(root)
    if store is None:
        from headwater.artifacts import store_for

        store = _stores[root] = store_for(root)
    store.upload(local, uri)


#: Artifact stores by pipeline root, made once per worker process.
_stores: dict[str, Any] = {}


def cancel_run(run_key: str, dask_worker: Any = None) -> int:
    """Stop this worker's task processes of `run_key` (run through `Client.run`, which passes
    the worker as `dask_worker`)."""
    plugin = dask_worker.plugins.get(PLUGIN) if dask_worker is not None else None
    if not isinstance(plugin, HeadwaterPlugin):
        return 0
    return sum(host.cancel(run_key) for host in list(plugin.hosts.values()))


def relocate(launch: Launch, workdir: Path) -> Launch:
    """`launch` with its task directory moved to `workdir`, wherever the old one appears."""
    old = str(launch.workdir)
    return _swap(launch, old, str(workdir))


def _swap(value: T, old: str, new: str) -> T:
    """`value` with every path under `old` moved under `new` (dataclasses, dicts, lists...)."""
    result: Any = value
    if isinstance(value, str):
        if value == old or value.startswith(old + "/"):
            result = new + value[len(old) :]
    elif isinstance(value, Path):
        moved = _swap(str(value), old, new)
        result = Path(moved) if moved != str(value) else value
    elif isinstance(value, dict):
        result = {k: _swap(v, old, new) for k, v in value.items()}
    elif isinstance(value, list):
        result = [_swap(v, old, new) for v in value]
    elif isinstance(value, tuple) and not hasattr(value, "_fields"):
        result = tuple(_swap(v, old, new) for v in value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _swap(getattr(value, f.name), old, new)
            for f in dataclasses.fields(value)
            if f.init
        }
        result = dataclasses.replace(value, **changes)
    return result  # type: ignore[no-any-return]
