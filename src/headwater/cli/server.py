"""`headwater server`: KFP's REST API, the web UI and a run queue on one port.

Binds 127.0.0.1 unless told otherwise; a non-loopback --host needs --token (or
$HEADWATER_TOKEN), which `kfp.Client(existing_token=...)` sends as a bearer token, or personal
tokens or a trusted proxy (`headwater server tokens|users`, `cli.principals`): the server is
then multi-user. Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any

from headwater.cli.listen import (
    Listen,
    add_listen_options,
    bind_listen,
    listen_options,
    max_body_bytes,
    run_app,
)
from headwater.config import CONTAINER_MODES
from headwater.errors import InvalidArgumentError
from headwater.sandbox.policy import DEFAULT_UID


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `server` on the CLI's subparsers."""
    server = sub.add_parser(
        "server",
        help="serve KFP's REST API (kfp.Client) and the web UI, and execute submitted runs",
        description="Serve Kubeflow Pipelines' v2beta1 REST API (/apis/v2beta1), the web UI "
        "and its JSON API (/api/v1) on one port, and execute the runs submitted to it.",
    )
    add_listen_options(
        server,
        port=8888,
        token_help="the server's own token, an admin's (without personal tokens or a trusted "
        "proxy, every request must carry it)",
        body_limit=True,
    )
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
        help="runs executing at once on this machine; the others wait in the queue (default 4)",
    )
    server.add_argument(
        "--lease-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="with several servers on one database: a run whose worker on another machine has "
        "not renewed its lease for S seconds is resumed here (default 30)",
    )
    server.add_argument(
        "--containers",
        choices=CONTAINER_MODES,
        help="which tasks run in their container images, by Podman or Docker: auto (container "
        "components, when a runtime is found), always (Python components too), never (all on "
        "this machine); default $HEADWATER_CONTAINERS, else auto",
    )
    server.add_argument(
        "--no-install-packages",
        action="store_true",
        help="do not install the packages_to_install of components (installed by default)",
    )
    sandbox = server.add_mutually_exclusive_group()
    sandbox.add_argument(
        "--sandbox",
        action="store_true",
        help="run every task in a sandbox of its own (bubblewrap) even on a single-user server "
        "(a multi-user server always does, unless --no-sandbox)",
    )
    sandbox.add_argument(
        "--no-sandbox",
        action="store_true",
        help="do not sandbox tasks, even of a multi-user server: every editor's code can then "
        "read the server's files and secrets (said at every start and in /healthz)",
    )
    server.add_argument(
        "--sandbox-read",
        action="append",
        default=[],
        metavar="PATH",
        help="a path every sandboxed task may read besides its own (shared data; repeatable)",
    )
    server.add_argument(
        "--sandbox-uid",
        type=int,
        default=DEFAULT_UID,
        metavar="UID",
        help=f"the user id sandboxed tasks run as when the server runs as root (default "
        f"{DEFAULT_UID}, nobody); as anyone else they run as the server's user",
    )
    server.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="an address or network (10.0.0.5, 10.0.0.0/24) of an auth proxy whose "
        "--user-header names the user; from any other address the header is ignored "
        "(repeatable; makes the server multi-user)",
    )
    server.add_argument(
        "--user-header",
        default="kubeflow-userid",
        metavar="NAME",
        help="the header a trusted proxy names the user in (default kubeflow-userid, as KFP)",
    )
    server.add_argument(
        "--user-prefix",
        default="",
        metavar="TEXT",
        help="taken off the header's value (e.g. accounts.google.com:)",
    )
    server.add_argument(
        "--audit-log",
        metavar="PATH",
        help="where every request that may change something is recorded, as JSON lines "
        "(default $HEADWATER_HOME/server-logs/audit.jsonl; read it with 'headwater server audit')",
    )
    server.add_argument(
        "--audit-max-mb",
        type=float,
        default=10.0,
        metavar="MB",
        help="rotate the audit log past this size (default 10), keeping --audit-backups files",
    )
    server.add_argument(
        "--audit-backups", type=int, default=5, metavar="N", help="old audit logs kept (default 5)"
    )
    server.add_argument(
        "--metadata-url", dest="server_metadata_url", metavar="URL", help=argparse.SUPPRESS
    )
    from headwater.cli.principals import add_parsers as add_principal_parsers

    add_principal_parsers(server, parser_class)


def cmd_server(args: argparse.Namespace) -> int:
    """`headwater server`: serve until interrupted (or `tokens`, `users`, `audit`)."""
    from headwater import config

    if getattr(args, "server_command", None):
        from headwater.cli.principals import cmd_principals

        return cmd_principals(args)
    url = args.server_metadata_url or args.metadata_url or config.metadata_url()
    if url == config.metadata_url():
        config.home().mkdir(parents=True, exist_ok=True)
    from headwater.identify import trusted_networks

    trusted_networks(args.trusted_proxy)  # one line for a value that is not an address
    if not args.user_header.strip() or not all(33 <= ord(c) < 127 for c in args.user_header):
        raise InvalidArgumentError(f"--user-header must be a header name, got {args.user_header!r}")
    body_limit = max_body_bytes(args)
    if args.max_concurrent_runs < 1:
        raise InvalidArgumentError(
            f"--max-concurrent-runs must be at least 1, got {args.max_concurrent_runs}"
        )
    if not 3 <= args.lease_seconds <= 3600:
        raise InvalidArgumentError(
            f"--lease-seconds must be from 3 to 3600, got {args.lease_seconds:g}"
        )
    if args.executor not in ("local", "dask"):
        raise InvalidArgumentError(f"--executor must be local or dask, got {args.executor!r}")
    if args.scheduler and args.executor != "dask":
        raise InvalidArgumentError("--scheduler needs --executor dask")
    from headwater import _deps

    _deps.require_installed(["croniter"], "server", "headwater server's recurring runs")
    # Read by every run and every artifact read: a bad value stops the server now, not each run.
    config.task_log_limit()
    config.artifact_read_limit()
    if (args.containers or config.containers()) != "never":
        from headwater.executors.containers import find_runtime

        config.container_args()
        find_runtime()  # a runtime named by HEADWATER_CONTAINER_RUNTIME must be there
    multi_user = _multi_user(args, url)
    listen = listen_options(args, exposes="run pipelines on this machine", guarded=multi_user)
    _check_sandbox(args, multi_user)
    if multi_user:
        _private_home()
    # Read now: nothing this server starts (its workers, their tasks, a Dask cluster) needs it.
    os.environ.pop(config.TOKEN_ENV, None)
    scheduler = args.scheduler or (config.dask_scheduler() if args.executor == "dask" else None)
    # Bound first: the local Dask cluster below opens ports of its own, and must not take this.
    sock = bind_listen(listen)
    cluster = None
    try:
        if args.executor == "dask" and not scheduler:
            # A sandboxing server's cluster takes only its own workers' TLS credentials: a
            # task must not hand code to worker processes that run outside any sandbox.
            private = not args.no_sandbox and (args.sandbox or multi_user)
            cluster = _warm_cluster(private)
            scheduler = str(cluster.scheduler_address)
        return _serve(args, url, scheduler, listen, body_limit, sock)
    finally:
        sock.close()
        if cluster is not None:
            _close_cluster(cluster)
            import shutil

            shutil.rmtree(config.home() / "server-keys" / f"dask-{os.getpid()}", True)


def _check_sandbox(args: argparse.Namespace, multi_user: bool) -> None:
    """Refuse to start a server whose tasks must be sandboxed on a machine that cannot, and
    say so at every start of a multi-user one whose tasks are not.

    Raises:
        SandboxError: One line naming what is missing (bubblewrap, user namespaces).
        InvalidArgumentError: A bad --sandbox-uid or --sandbox-read.
    """
    if not 0 < args.sandbox_uid < 2**32 - 1:
        raise InvalidArgumentError(
            f"--sandbox-uid must be a user id above 0, got {args.sandbox_uid}"
        )
    for path in args.sandbox_read:
        if not os.path.exists(path):
            raise InvalidArgumentError(
                f"--sandbox-read {path!r} does not exist: give a file or folder"
            )
    if args.no_sandbox:
        if multi_user:
            print(NOT_ISOLATED, file=sys.stderr, flush=True)
        return
    if args.sandbox or multi_user:
        from headwater.errors import SandboxError
        from headwater.sandbox import check_available

        try:
            check_available()
        except SandboxError as exc:
            raise SandboxError(
                f"{exc}; or start it with --no-sandbox (tasks not isolated)"
            ) from None


def _private_home() -> None:
    """Make `$HEADWATER_HOME` its owner's alone: a team server keeps every namespace's runs,
    logs, artifacts and keys there, which no other user of the machine may read."""
    from headwater import config

    home = config.home()
    home.mkdir(parents=True, exist_ok=True)
    if home.stat().st_uid == os.geteuid():
        home.chmod(0o700)


#: What a multi-user server started with --no-sandbox says at every start (and in /healthz).
NOT_ISOLATED = (
    "headwater: warning: --no-sandbox: the tasks of this multi-user server are not isolated: "
    "any editor's component can read the server's files, environment and other namespaces' "
    "artifacts"
)


def _multi_user(args: argparse.Namespace, url: str) -> bool:
    """True if the server will need a principal on every request (personal tokens or users in
    its store, or a trusted proxy): it may then listen beyond loopback without --token."""
    from headwater.api.principals import has_principals

    return bool(args.trusted_proxy) or has_principals(url, upgrade=True)


def _warm_cluster(private: bool) -> Any:
    """The local Dask cluster that every run of this server uses, started once (as
    `headwater run --executor dask` starts one per run: same size, same settings); with
    `private`, one that requires TLS credentials only the server's workers hold (under
    `$HEADWATER_HOME/server-keys`, which no task sees)."""
    from headwater import config
    from headwater._deps import require
    from headwater.executors.dask_cluster import private_security, start_local_cluster

    require("distributed", "dask", "the dask executor")  # one line without the dask extra
    security = None
    if private:
        security = private_security(config.home() / "server-keys" / f"dask-{os.getpid()}")
    cluster = start_local_cluster(security)
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
    args: argparse.Namespace,
    url: str,
    scheduler: str | None,
    listen: Listen,
    body_limit: int,
    sock: socket.socket,
) -> int:
    from headwater import config
    from headwater.server import create_app
    from headwater.server.queue import QueueSettings

    settings = QueueSettings(
        metadata_url=url,
        max_concurrent_runs=args.max_concurrent_runs,
        executor=args.executor,
        scheduler=scheduler,
        install_packages=not args.no_install_packages,
        containers=args.containers,
        log_dir=str(config.home() / "server-logs"),
        lease_s=args.lease_seconds,
        sandbox="always" if args.sandbox else "never" if args.no_sandbox else "auto",
        sandbox_uid=args.sandbox_uid,
        sandbox_read=tuple(os.path.abspath(p) for p in args.sandbox_read),
        sandbox_hidden=(os.path.abspath(args.token_file),) if args.token_file else (),
        trusted_proxy=bool(args.trusted_proxy),
    )
    from headwater.cli.listen import megabytes
    from headwater.cli.principals import audit_path
    from headwater.ui.audit import AuditLog

    if not 1 <= args.audit_backups <= 1000:
        raise InvalidArgumentError(
            f"--audit-backups must be from 1 to 1000, got {args.audit_backups}"
        )
    audit = AuditLog(
        audit_path(args.audit_log),
        max_bytes=megabytes(args.audit_max_mb, "--audit-max-mb"),
        backups=args.audit_backups,
    )
    app, queue = create_app(
        settings,
        listen.token,
        allowed_hosts=listen.hosts,
        max_body_bytes=body_limit,
        trusted_proxies=args.trusted_proxy,
        user_header=args.user_header,
        user_prefix=args.user_prefix,
        audit=audit,
    )
    queue.start()
    try:
        announce = "KFP API and UI at {url}/ (kfp.Client(host='{url}'))"
        run_app(app, listen, announce=announce, sock=sock)
    finally:
        queue.stop()
    return 0
