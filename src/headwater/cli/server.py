"""`headwater server`: KFP's REST API, the web UI and a run queue on one port.

Binds 127.0.0.1 unless told otherwise; a non-loopback --host needs --token (or
$HEADWATER_TOKEN), which `kfp.Client(existing_token=...)` sends as a bearer token. Bad input
is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.security import ALLOW_HOST_HELP, TOKEN_ENV, check_bind, hosts_for_bind, read_token


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `server` on the CLI's subparsers."""
    server = sub.add_parser(
        "server",
        help="serve KFP's REST API (kfp.Client) and the web UI, and execute submitted runs",
        description="Serve Kubeflow Pipelines' v2beta1 REST API (/apis/v2beta1), the web UI "
        "and its JSON API (/api/v1) on one port, and execute the runs submitted to it.",
    )
    server.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    server.add_argument("--port", type=int, default=8888, help="TCP port (default 8888)")
    server.add_argument(
        "--executor", default="local", help="executor of the runs: local (default) or dask"
    )
    server.add_argument(
        "--scheduler",
        metavar="ADDR",
        help="Dask scheduler for --executor dask (default: a local cluster started with the "
        "server, shared by every run)",
    )
    server.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=4,
        metavar="N",
        help="runs executing at once; the others wait in the queue (default 4)",
    )
    server.add_argument(
        "--no-install-packages",
        action="store_true",
        help="do not install the packages_to_install of components (installed by default)",
    )
    server.add_argument(
        "--metadata-url", dest="server_metadata_url", metavar="URL", help=argparse.SUPPRESS
    )
    server.add_argument(
        "--token",
        metavar="T",
        help=f"require this token on every request (default ${TOKEN_ENV}); needed for a "
        "non-loopback --host",
    )
    server.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME", help=ALLOW_HOST_HELP
    )


def cmd_server(args: argparse.Namespace) -> int:
    """`headwater server`: serve until interrupted."""
    from headwater import config

    token = read_token(args.token)
    check_bind(args.host, token, exposes="run pipelines on this machine")
    hosts = hosts_for_bind(args.host, args.allow_host)
    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port must be from 0 to 65535, got {args.port}")
    if args.max_concurrent_runs < 1:
        raise InvalidArgumentError(
            f"--max-concurrent-runs must be at least 1, got {args.max_concurrent_runs}"
        )
    if args.executor not in ("local", "dask"):
        raise InvalidArgumentError(f"--executor must be local or dask, got {args.executor!r}")
    if args.scheduler and args.executor != "dask":
        raise InvalidArgumentError("--scheduler needs --executor dask")
    from headwater import _deps

    _deps.require_installed(["croniter"], "server", "headwater server's recurring runs")
    url = args.server_metadata_url or args.metadata_url or config.metadata_url()
    if url == config.metadata_url():
        config.home().mkdir(parents=True, exist_ok=True)
    scheduler = args.scheduler or (config.dask_scheduler() if args.executor == "dask" else None)
    cluster = None
    if args.executor == "dask" and not scheduler:
        cluster = _warm_cluster()
        scheduler = str(cluster.scheduler_address)
    try:
        return _serve(args, url, scheduler, token, hosts)
    finally:
        if cluster is not None:
            _close_cluster(cluster)


def _warm_cluster() -> Any:
    """The local Dask cluster that every run of this server uses, started once (as
    `headwater run --executor dask` starts one per run: same size, same settings)."""
    from headwater._deps import require
    from headwater.executors.dask_cluster import start_local_cluster

    require("distributed", "dask", "the dask executor")  # one line without the dask extra
    cluster = start_local_cluster()
    n = len(cluster.workers)
    print(
        f"headwater: started a local Dask cluster at {cluster.scheduler_address} "
        f"({n} worker{'' if n == 1 else 's'}) for every run; it stops with the server",
        file=sys.stderr,
        flush=True,
    )
    return cluster


def _close_cluster(cluster: Any) -> None:
    """Stop the server's cluster; a worker that does not stop in time is left to die with
    this process (Dask's worker processes exit when their parent does)."""
    import contextlib

    with contextlib.suppress(Exception):
        cluster.close(timeout=10)


def _serve(
    args: argparse.Namespace, url: str, scheduler: str | None, token: str | None, hosts: Any
) -> int:
    from headwater import config
    from headwater.server import create_app
    from headwater.server.queue import QueueSettings
    from headwater.ui._deps import require

    settings = QueueSettings(
        metadata_url=url,
        max_concurrent_runs=args.max_concurrent_runs,
        executor=args.executor,
        scheduler=scheduler,
        install_packages=not args.no_install_packages,
        log_dir=str(config.home() / "server-logs"),
    )
    app, queue = create_app(settings, token, allowed_hosts=hosts)
    uvicorn = require("uvicorn")
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"headwater: KFP API and UI at http://{shown}:{args.port}/ "
        f"(kfp.Client(host='http://{shown}:{args.port}'))",
        file=sys.stderr,
        flush=True,
    )
    queue.start()
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        queue.stop()
    return 0
