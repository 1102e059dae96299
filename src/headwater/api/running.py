"""`run` and `resume`: run a pipeline to completion, or complete a failed or interrupted run.

Both take a `RunOptions` (`options=`) and/or its fields as keywords; a keyword that is not a
run option is an option of the executor (`scheduler=` for "dask"). The engine
(`engine.runner.execute`) does the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from headwater.engine.options import RunOptions
from headwater.engine.result import Run
from headwater.engine.runner import execute, executor_for, open_metadata
from headwater.errors import NotFoundError, UserError
from headwater.metadata.base import ACTIVE_RUN_STATES

if TYPE_CHECKING:
    from headwater.sandbox.policy import SandboxPolicy

__all__ = ["Run", "RunOptions", "TeamRules", "resume", "run", "run_queued"]


def run(
    pipeline: Any,
    arguments: Mapping[str, Any] | None = None,
    *,
    pipeline_name: str | None = None,
    options: RunOptions | None = None,
    **settings: Any,
) -> Run:
    """Run a KFP pipeline to completion and return the finished `Run`.

    Example::

        run = headwater.run("pipeline.py", {"n": 3}, executor="dask", max_parallel=8)

    Args:
        pipeline: A `@dsl.pipeline` object, a path to a .py file or compiled IR, or a loaded
            `PipelineIR`.
        arguments: Pipeline parameters by name (and input artifacts as URIs).
        pipeline_name: Which pipeline of a .py file that defines several.
        options: How to run it (`RunOptions`; default: all defaults).
        **settings: Fields of `RunOptions` to set (`executor`, `max_parallel`, `cache`,
            `enable_cache`, `pipeline_root`, `metadata`, `hooks`, `install_packages`,
            `strict_resources`), and options of an executor given by name (for "dask":
            `scheduler`, an address or a `distributed.Client`, and `shared_fs`).

    Returns:
        The finished run; `run.state` is "SUCCEEDED" or "FAILED".

    Raises:
        UserError: The pipeline, its arguments, an option or a store setting is invalid
            (nothing ran).
    """
    from headwater.spec.loader import load_pipeline

    opts = RunOptions.build(options, **settings)
    with contextlib.ExitStack() as stack:
        if opts.executor == "local":
            # Started first: its fork server warms up while the pipeline loads.
            opts = dataclasses.replace(
                opts, executor=stack.enter_context(executor_for(opts)), executor_options={}
            )
        ir = load_pipeline(pipeline, pipeline_name=pipeline_name)
        return execute(ir, arguments or {}, opts)


def resume(run_id: str, *, options: RunOptions | None = None, **settings: Any) -> Run:
    """Complete a failed, canceled or interrupted run, reusing every task that succeeded in it.

    The run is claimed in the store first, atomically (`MetadataStore.claim_run`): of several
    engines resuming one run at once exactly one runs it; the others raise RunClaimedError.
    The run's own pipeline, arguments and pipeline root are reused; `options` and `settings`
    are as for `run` (`pipeline_root` and `cache` are ignored).

    Raises:
        NotFoundError: No run with that id.
        RunClaimedError: Another engine is running it (the message names it as pid@host).
        UserError: The run succeeded already, or an option is invalid.
    """
    return _claimed(run_id, RunOptions.build(options, **settings), queued=False)


@dataclass(frozen=True)
class TeamRules:
    """How a team server runs a run, once its worker has it and knows whose it is.

    A run of a multi-user server (principals in its store, or `multi_user`: a trusted proxy)
    is its namespace's: its tasks get the namespace's own secrets, config maps, volumes and
    package environments, and run in `sandbox` (unless None: `--no-sandbox`) with the
    namespace's storage credentials, if an admin gave it any. With `always`, a run of a
    single-user server is sandboxed too (`--sandbox`).
    """

    sandbox: SandboxPolicy | None = None
    always: bool = False
    multi_user: bool = False

    def apply(self, store: Any, record: Any, options: RunOptions) -> RunOptions:
        """`options` for the run `record` of `store`."""
        team = self.multi_user or store.has_principals()
        if not team:
            if not self.always or self.sandbox is None:
                return options
            # One user's server: sandboxed, and its inputs may be anywhere that user's are.
            alone = dataclasses.replace(self.sandbox, confined=False)
            return dataclasses.replace(options, sandbox=alone)
        namespace = record.namespace or ""
        policy = self.sandbox
        if policy is not None and namespace:
            policy = dataclasses.replace(policy, secret_env=_storage_env(store, namespace))
        return dataclasses.replace(options, sandbox=policy, namespace=namespace)


def _storage_env(store: Any, namespace: str) -> tuple[tuple[str, str], ...]:
    """The namespace's storage credentials for its tasks: each key of the secret its settings
    name, as a variable (read by the task process, never carried in a message)."""
    from headwater import config
    from headwater.platform.secrets import LocalSecretStore

    settings = store.get_namespace(namespace)
    if settings is None or not settings.storage_secret:
        return ()
    secrets = LocalSecretStore.for_home(config.namespace_home(namespace))
    if not secrets.exists(settings.storage_secret):
        raise UserError(
            f"namespace {namespace!r} names secret {settings.storage_secret!r} for its storage, "
            "and it has none such: an admin sets it with `headwater secrets set --namespace "
            f"{namespace} {settings.storage_secret} KEY=VALUE...`"
        )
    folder = secrets.path(settings.storage_secret)
    return tuple((key, str(folder / key)) for key in secrets.keys(settings.storage_secret))


def run_queued(
    run_id: str, options: RunOptions, *, lease_s: float = 30.0, team: TeamRules | None = None
) -> Run:
    """Take a QUEUED run from the queue (`headwater server`'s workers) and run it to its end.

    As `resume`, but the run must be QUEUED; a setup that fails before the engine starts (a
    package that does not install, a pipeline root that cannot be written) ends it FAILED
    with the reason, where `resume` leaves it INTERRUPTED to try again.

    While it runs, this worker holds a lease on it: `lease_s` seconds, renewed every sixth of
    that (`MetadataStore.renew_lease`). A terminate seen there (from a server on another
    machine) stops it as SIGTERM does. A run another server took over is left at once, and a
    worker that could not renew for half its lease (its machine cut off from the database)
    leaves its run before the lease ends, so before another server may take it over; the
    run's end is recorded only while this worker holds it. `team` says how a team server
    runs it, by whose it is (`TeamRules`).

    Raises:
        RunClaimedError: It is not QUEUED (canceled meanwhile, or taken by another worker).
        UserError: As `resume`; the run is FAILED.
    """
    return _claimed(run_id, options, queued=True, lease_s=lease_s, team=team)


def _claimed(
    run_id: str,
    opts: RunOptions,
    *,
    queued: bool,
    lease_s: float = 30.0,
    team: TeamRules | None = None,
) -> Run:
    from headwater.processes import process_start
    from headwater.spec.ir import parse_pipeline

    stores = open_metadata(opts.metadata)
    # The run's writes still go through the recorder (stdlib SQLite, for the default store);
    # reading and claiming the run need the full store.
    store = stores.full()
    host, pid = socket.gethostname(), os.getpid()
    if queued:
        record = store.claim_run(
            run_id,
            engine_host=host,
            engine_pid=pid,
            engine_started=process_start(pid),
            queued=True,
            lease_until=time.time() + lease_s,
        )
    else:
        record = _claim_for_resume(store, run_id, host, pid)
    lease = _Lease(store, record.run_id, host, pid, lease_s) if queued else None
    try:
        doc = store.get_pipeline_ir(record.run_id)
        if doc is None:
            raise NotFoundError(f"run {record.run_id} has no recorded pipeline to resume")
        if team is not None:
            opts = team.apply(store, record, opts)
        return execute(
            parse_pipeline(doc),
            record.parameters,
            dataclasses.replace(
                opts,
                pipeline_root=record.pipeline_root or None,
                metadata=stores,
                cache=None,
                cache_scope=record.namespace,
            ),
            run_id=record.run_id,
        )
    except Exception as exc:
        if not queued:
            _give_back(store, record.run_id, host, pid)
            raise
        # A user's mistake (nothing ran) or not, starting the run again the same way would
        # meet it again: the run fails with what happened (the worker's log has a traceback).
        with contextlib.suppress(Exception):
            store.finish_run(
                record.run_id,
                state="FAILED",
                outputs={},
                error={"error_type": type(exc).__name__, "message": str(exc)},
                finished_at=time.time(),
                engine_host=host,
                engine_pid=pid,
            )
        raise
    except BaseException:
        _give_back(store, record.run_id, host, pid)
        raise
    finally:
        if lease is not None:
            lease.stop()


class _Lease:
    """A thread renewing a queued run's lease while this process runs it (see `run_queued`)."""

    def __init__(self, store: Any, run_id: str, host: str, pid: int, lease_s: float) -> None:
        import threading

        self._store, self._run_id, self._host, self._pid = store, run_id, host, pid
        self._lease_s = lease_s
        self._stopped = threading.Event()
        self._canceling = False
        threading.Thread(target=self._beat, name="headwater-lease", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _beat(self) -> None:
        import signal

        renewed = time.monotonic()
        while not self._stopped.wait(self._lease_s / 6):
            try:
                state = self._store.renew_lease(
                    self._run_id,
                    engine_host=self._host,
                    engine_pid=self._pid,
                    lease_until=time.time() + self._lease_s,
                )
            except Exception:  # the store unreachable: the lease runs on, for a while
                if time.monotonic() - renewed > self._lease_s / 2:
                    self._leave(
                        "could not renew its lease for half of it (the database is "
                        "unreachable): leaving it before another server takes it over"
                    )
                continue
            renewed = time.monotonic()
            if self._stopped.is_set():
                return
            if state is None:
                self._leave("was taken over by another server (this worker's lease lapsed)")
            if state == "CANCELING" and not self._canceling:
                self._canceling = True
                os.kill(os.getpid(), signal.SIGTERM)
            if state not in ACTIVE_RUN_STATES:
                return  # this worker ended it: nothing left to hold

    def _leave(self, why: str) -> NoReturn:
        import sys

        message = f"headwater: run {self._run_id} {why}; stopping without another write"
        print(message, file=sys.stderr, flush=True)
        os._exit(75)  # its task processes end with this process (the fork server's rule)


def _claim_for_resume(store: Any, run_id: str, host: str, pid: int) -> Any:
    from headwater.processes import process_start

    record = store.get_run(run_id)
    if record is None:
        raise NotFoundError(f"no run {run_id!r}: see `headwater runs list`")
    return store.claim_run(
        record.run_id, engine_host=host, engine_pid=pid, engine_started=process_start(pid)
    )


def _give_back(store: Any, run_id: str, host: str, pid: int) -> None:
    """Stopped before the engine recorded an end (bad setup, Ctrl-C): give the run back,
    resumable (CANCELED if it was being canceled). A no-op once the run is finished or held
    by another engine."""
    with contextlib.suppress(Exception):
        store.mark_interrupted(run_id, finished_at=time.time(), engine_host=host, engine_pid=pid)
