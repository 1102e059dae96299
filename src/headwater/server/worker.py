"""One queued run, executed in a process of its own: `python -m headwater.server.worker RUN_ID`.

The queue (`server.queue`) starts one per run, in a new session, so that terminating a run
is a signal to this process (SIGTERM: its tasks are stopped, the run recorded INTERRUPTED,
as Ctrl-C does for `headwater run`), and a server that dies leaves the run going. A run
that has a Headwater record already (a retry, or a worker that died) is resumed, reusing
every task that finished; otherwise it starts under the id the server gave it.

Exit status: 0 succeeded, 1 failed, 2 bad input (nothing ran), 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from typing import Any, NoReturn

__all__ = ["main", "worker_argv"]


def worker_argv(
    run_id: str,
    *,
    metadata_url: str,
    executor: str,
    scheduler: str | None,
    install_packages: bool,
) -> list[str]:
    """The command line that runs `run_id` in a worker process."""
    argv = [sys.executable, "-m", "headwater.server.worker", run_id]
    argv += ["--metadata-url", metadata_url, "--executor", executor]
    if scheduler:
        argv += ["--scheduler", scheduler]
    if not install_packages:
        argv.append("--no-install-packages")
    return argv


def _interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run or resume one queued run to its end; see the module docstring."""
    parser = argparse.ArgumentParser(prog="headwater.server.worker")
    parser.add_argument("run_id")
    parser.add_argument("--metadata-url", required=True)
    parser.add_argument("--executor", default="local")
    parser.add_argument("--scheduler")
    parser.add_argument("--no-install-packages", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args)
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace) -> int:
    from headwater.api.running import resume
    from headwater.engine.options import RunOptions
    from headwater.engine.runner import execute
    from headwater.errors import UserError
    from headwater.metadata import open_store
    from headwater.metadata.reconcile import mark_dead_runs
    from headwater.server.runs import pipeline_of
    from headwater.server.store import KfpStore

    kfp = KfpStore(args.metadata_url)
    record = kfp.run(args.run_id)
    options = RunOptions.build(
        executor=args.executor,
        metadata=args.metadata_url,
        install_packages=not args.no_install_packages,
        scheduler=args.scheduler,
    )
    store = open_store(args.metadata_url)
    try:
        if store.get_run(args.run_id) is not None:
            mark_dead_runs(store)  # the worker that ran it before may have been killed
            result = resume(args.run_id, options=options)
        else:
            ir, arguments, root = pipeline_of(kfp, record)
            result = execute(
                ir,
                arguments,
                dataclasses.replace(options, pipeline_root=root or None),
                new_run_id=args.run_id,
            )
    except UserError as exc:
        kfp.update_run(args.run_id, error=str(exc))
        print(f"headwater: error: {exc}", file=sys.stderr)
        return 2
    return 0 if result.state == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
