"""One queued run, executed by a worker process: what each of the launcher's workers does.

A worker takes its run from the queue (`api.running.run_queued`: QUEUED -> RUNNING with its
own pid, start time and host, atomically) and runs it to its end; a run that has tasks
already (a retry, or a worker that died under it) is resumed, reusing every task that
finished. Terminating the run is a SIGTERM to this process: its tasks are stopped and the run
recorded CANCELED. A worker lives in its own session, so a server that dies leaves its runs
going; the next server finds them by pid and start time.

`python -m headwater.server.worker RUN_ID --metadata-url URL` runs one the same way from a
fresh interpreter (the launcher forks warm ones instead: `server.launcher`).

Exit status: 0 succeeded, 1 failed, 2 bad input (nothing ran), 3 not in the queue any more,
75 left its run without another write (its lease could not be renewed, or another server
took the run over: `api.running.run_queued`), 130 interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

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

    def argv(self) -> list[str]:
        """These settings as command-line options (of the launcher and of `main`)."""
        argv = ["--metadata-url", self.metadata_url, "--executor", self.executor]
        argv += ["--lease-seconds", str(self.lease_s)]
        if self.scheduler:
            argv += ["--scheduler", self.scheduler]
        if not self.install_packages:
            argv.append("--no-install-packages")
        if self.containers:
            argv += ["--containers", self.containers]
        return argv

    @classmethod
    def parser(cls, prog: str) -> argparse.ArgumentParser:
        """A parser of `argv`'s options."""
        parser = argparse.ArgumentParser(prog=prog)
        parser.add_argument("--metadata-url", required=True)
        parser.add_argument("--executor", default="local")
        parser.add_argument("--scheduler")
        parser.add_argument("--no-install-packages", action="store_true")
        parser.add_argument("--containers")
        parser.add_argument("--lease-seconds", type=float, default=30.0)
        return parser

    @classmethod
    def of(cls, args: argparse.Namespace) -> WorkerSettings:
        """The settings `parser` read."""
        return cls(
            metadata_url=args.metadata_url,
            executor=args.executor,
            scheduler=args.scheduler,
            install_packages=not args.no_install_packages,
            containers=args.containers,
            lease_s=args.lease_seconds,
        )


def _interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


def run_one(run_id: str, settings: WorkerSettings, *, executor: Any = None) -> int:
    """Take `run_id` from the queue and run it to its end; the exit status (see the module
    docstring). SIGTERM stops it as Ctrl-C stops `headwater run`.

    Args:
        run_id: A QUEUED run.
        settings: How to run it.
        executor: An executor made already (a warm worker's, with its fork server started),
            shut down when the run ends; None makes the one `settings` name.
    """
    from headwater.api.running import run_queued
    from headwater.engine.options import RunOptions
    from headwater.errors import RunClaimedError, UserError

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        options = RunOptions.build(
            executor=executor if executor is not None else settings.executor,
            metadata=settings.metadata_url,
            install_packages=settings.install_packages,
            containers=settings.containers,
            scheduler=settings.scheduler if executor is None else None,
        )
        try:
            result = run_queued(run_id, options, lease_s=settings.lease_s)
        finally:
            if executor is not None:
                executor.shutdown()
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
    parser = WorkerSettings.parser("headwater.server.worker")
    parser.add_argument("run_id")
    args = parser.parse_args(argv)
    return run_one(args.run_id, WorkerSettings.of(args))


if __name__ == "__main__":
    sys.exit(main())
