"""One queued run, executed by a worker process: what each of the launcher's workers does.

A worker takes its run from the queue (`api.running.run_queued`: QUEUED -> RUNNING with its
own pid, start time and host, atomically) and runs it to its end; a run that has tasks
already (a retry, or a worker that died under it) is resumed, reusing every task that
finished. Terminating the run is a SIGTERM to this process: its tasks are stopped and the run
recorded CANCELED. A worker lives in its own session, so a server that dies leaves its runs
going; the next server finds them by pid and start time.

`python -m headwater.server.worker RUN_ID` runs one the same way from a fresh interpreter (the
launcher forks warm ones instead: `server.launcher`), on the store `$HEADWATER_METADATA_URL`
names: its URL, which may hold a password, is never on a command line.

A run of a multi-user server (or of one started with `--sandbox`) runs each task in a sandbox
(`headwater.sandbox`), with its namespace's secrets, volumes and package environments and
its namespace's storage credentials; which it is, the worker learns once it has the run
(`api.running.TeamRules`).

Exit status: 0 succeeded, 1 failed, 2 bad input (nothing ran), 3 not in the queue any more,
75 left its run without another write (its lease could not be renewed, or another server
took the run over: `api.running.run_queued`), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from headwater.sandbox.policy import DEFAULT_UID

if TYPE_CHECKING:
    from headwater.api.running import TeamRules

__all__ = ["WorkerSettings", "main", "run_one"]


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker runs its run (`headwater server`'s options)."""

    metadata_url: str
    executor: str = "local"
    scheduler: str | None = None
    install_packages: bool = True
    #: Which tasks run in their container images (None: `HEADWATER_CONTAINERS`, else auto).
    containers: str | None = None
    #: Seconds a run's lease lasts unless renewed (`api.running.run_queued`).
    lease_s: float = 30.0
    #: Whose tasks are sandboxed: "auto" (a multi-user server's), "always" or "never".
    sandbox: str = "auto"
    sandbox_uid: int = DEFAULT_UID
    sandbox_read: tuple[str, ...] = ()
    sandbox_hidden: tuple[str, ...] = ()
    #: A trusted proxy names users: multi-user whatever the store holds.
    trusted_proxy: bool = False

    def argv(self) -> list[str]:
        """These settings as command-line options (of the launcher and of `main`), all but
        the store's URL, which goes in `$HEADWATER_METADATA_URL`."""
        argv = ["--executor", self.executor, "--lease-seconds", str(self.lease_s)]
        if self.scheduler:
            argv += ["--scheduler", self.scheduler]
        if not self.install_packages:
            argv.append("--no-install-packages")
        if self.containers:
            argv += ["--containers", self.containers]
        argv += ["--sandbox", self.sandbox, "--sandbox-uid", str(self.sandbox_uid)]
        argv += [part for path in self.sandbox_read for part in ("--sandbox-read", path)]
        argv += [part for path in self.sandbox_hidden for part in ("--sandbox-hide", path)]
        if self.trusted_proxy:
            argv.append("--trusted-proxy")
        return argv

    @classmethod
    def parser(cls, prog: str) -> argparse.ArgumentParser:
        """A parser of `argv`'s options."""
        parser = argparse.ArgumentParser(prog=prog)
        parser.add_argument("--executor", default="local")
        parser.add_argument("--scheduler")
        parser.add_argument("--no-install-packages", action="store_true")
        parser.add_argument("--containers")
        parser.add_argument("--lease-seconds", type=float, default=30.0)
        parser.add_argument("--sandbox", choices=("auto", "always", "never"), default="auto")
        parser.add_argument("--sandbox-uid", type=int, default=DEFAULT_UID)
        parser.add_argument("--sandbox-read", action="append", default=[])
        parser.add_argument("--sandbox-hide", action="append", default=[])
        parser.add_argument("--trusted-proxy", action="store_true")
        return parser

    @classmethod
    def of(cls, args: argparse.Namespace) -> WorkerSettings:
        """The settings `parser` read, with the store `$HEADWATER_METADATA_URL` names.

        Raises:
            UserError: `$HEADWATER_METADATA_URL` is not set.
        """
        from headwater import config
        from headwater.errors import UserError

        url = os.environ.get(config.METADATA_URL_ENV, "").strip()
        if not url:
            raise UserError(f"a worker's store is ${config.METADATA_URL_ENV}, which is not set")
        return cls(
            metadata_url=url,
            executor=args.executor,
            scheduler=args.scheduler,
            install_packages=not args.no_install_packages,
            containers=args.containers,
            lease_s=args.lease_seconds,
            sandbox=args.sandbox,
            sandbox_uid=args.sandbox_uid,
            sandbox_read=tuple(args.sandbox_read),
            sandbox_hidden=tuple(args.sandbox_hide),
            trusted_proxy=args.trusted_proxy,
        )

    def team(self) -> TeamRules:
        """How a run is run once the worker knows whose it is (`api.running.TeamRules`)."""
        from headwater.api.running import TeamRules
        from headwater.sandbox import SandboxPolicy

        policy = SandboxPolicy(
            uid=self.sandbox_uid,
            readable=self.sandbox_read,
            hidden=self.sandbox_hidden,
            confined=True,
        )
        return TeamRules(
            sandbox=None if self.sandbox == "never" else policy,
            always=self.sandbox == "always",
            multi_user=self.trusted_proxy,
        )

    def sandboxed_at_start(self, multi_user: bool) -> bool:
        """Whether a spare worker's fork server should start ready for sandboxed tasks."""
        return self.sandbox == "always" or (self.sandbox == "auto" and multi_user)


def _interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


def run_one(run_id: str, settings: WorkerSettings, *, server: Any = None) -> int:
    """Take `run_id` from the queue and run it to its end; the exit status (see the module
    docstring). SIGTERM stops it as Ctrl-C stops `headwater run`.

    Args:
        run_id: A QUEUED run.
        settings: How to run it.
        server: A fork server started already (a warm worker's `PrestartedServer`), which
            the run's local executor adopts if it was started for such tasks (sandboxed or
            not); closed here if it was not.
    """
    from headwater.api.running import run_queued
    from headwater.components.requests import RunRequests
    from headwater.engine.options import RunOptions
    from headwater.errors import RunClaimedError, UserError

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        local = settings.executor == "local"
        options = RunOptions.build(
            executor=settings.executor,
            metadata=settings.metadata_url,
            install_packages=settings.install_packages,
            containers=settings.containers,
            scheduler=None if local else settings.scheduler,
            server=server if local else None,
            requests=RunRequests(settings.metadata_url),
        )
        try:
            result = run_queued(run_id, options, lease_s=settings.lease_s, team=settings.team())
        finally:
            if server is not None:
                server.close()  # unless the executor adopted it
    except KeyboardInterrupt:
        return 130
    except RunClaimedError as exc:
        print(f"headwater: {exc}", file=sys.stderr)
        return 3
    except UserError as exc:
        print(f"headwater: error: {exc}", file=sys.stderr)
        return 2
    except Exception:  # the run is FAILED with it (`run_queued`); the traceback is for us
        import traceback

        traceback.print_exc()
        return 1
    print(f"headwater: run {run_id} {result.state}", file=sys.stderr)
    return 0 if result.state == "SUCCEEDED" else 1


def main(argv: list[str] | None = None) -> int:
    """Run one queued run in this process; see the module docstring."""
    from headwater.errors import UserError

    parser = WorkerSettings.parser("headwater.server.worker")
    parser.add_argument("run_id")
    args = parser.parse_args(argv)
    try:
        settings = WorkerSettings.of(args)
    except UserError as exc:
        print(f"headwater: error: {exc}", file=sys.stderr)
        return 2
    return run_one(args.run_id, settings)


if __name__ == "__main__":
    sys.exit(main())
