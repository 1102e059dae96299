"""The listening options and start-up that `headwater serve`, `ui` and `server` share: where to
listen (`--host`, `--port`), the token, the extra host names, their checks, and running an app.

Binds 127.0.0.1 unless told otherwise; a non-loopback --host needs --token (or
$HEADWATER_TOKEN). Bad values are `InvalidArgumentError`s: one line and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import socket
import sys
from dataclasses import dataclass
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.security import (
    ALLOW_HOST_HELP,
    ANY_HOST,
    TOKEN_ENV,
    check_bind,
    hosts_for_bind,
    is_loopback,
    read_token,
)
from headwater.ui.body_limit import DEFAULT_MAX_BODY_MB

__all__ = [
    "Listen",
    "add_listen_options",
    "listen_options",
    "max_body_bytes",
    "megabytes",
    "run_app",
]


@dataclass(frozen=True)
class Listen:
    """Where a server listens and whom it answers: the token (None: none) and the `Host`
    names beyond loopback's."""

    host: str
    port: int
    token: str | None
    hosts: tuple[str, ...]

    @property
    def url(self) -> str:
        """The server's base URL, as a person would type it."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"


def add_listen_options(
    parser: argparse.ArgumentParser, *, port: int, token_help: str, body_limit: bool = False
) -> None:
    """Add `--host`, `--port` (default `port`), `--token` and `--allow-host` to `parser`, and
    with `body_limit` `--max-request-mb` (see `max_body_bytes`)."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=port, help=f"TCP port (default {port}; 0: any)")
    parser.add_argument(
        "--token",
        metavar="T",
        help=f"{token_help} (default ${TOKEN_ENV}); needed for a non-loopback --host. Every "
        "user of this machine can read a command line: prefer --token-file",
    )
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the token from the first line of PATH (a file only the server's user can "
        "read), instead of --token",
    )
    parser.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME", help=ALLOW_HOST_HELP
    )
    if body_limit:
        parser.add_argument(
            "--max-request-mb",
            type=float,
            default=DEFAULT_MAX_BODY_MB,
            metavar="M",
            help=f"largest request body in MiB (default {DEFAULT_MAX_BODY_MB:g}); larger ones "
            "are refused 413 as they arrive",
        )


def max_body_bytes(args: argparse.Namespace) -> int:
    """`--max-request-mb` in bytes (see `megabytes`)."""
    return megabytes(args.max_request_mb, "--max-request-mb")


def megabytes(value: float, option: str) -> int:
    """A size in MiB given as `option`, in bytes.

    Raises:
        InvalidArgumentError: It is not a finite number of at least one byte.
    """
    if not (math.isfinite(value) and value * 2**20 >= 1):
        raise InvalidArgumentError(
            f"{option} must be a positive number of MiB (at least one byte), got {value:g}"
        )
    return int(value * 2**20)


def listen_options(
    args: argparse.Namespace, *, exposes: str | None = None, guarded: bool = False
) -> Listen:
    """The options `add_listen_options` added, checked.

    Args:
        args: The parsed command line.
        exposes: What listening beyond loopback without a token would expose (for the
            refusal's message).
        guarded: Every request will need a principal (a multi-user `headwater server`):
            listening beyond loopback needs no token.

    Raises:
        InvalidArgumentError: A port out of range, a bad host name, or a non-loopback host
            without a token.
    """
    token = read_token(args.token, file=args.token_file)
    if args.token:
        print(
            "headwater: warning: --token on the command line can be read by every user of this "
            "machine (ps, /proc/PID/cmdline): give it with --token-file or $HEADWATER_TOKEN",
            file=sys.stderr,
        )
    if guarded:
        pass
    elif exposes is None:
        check_bind(args.host, token)
    else:
        check_bind(args.host, token, exposes=exposes)
    hosts = tuple(hosts_for_bind(args.host, args.allow_host))
    if guarded and not token and not args.allow_host and not is_loopback(args.host):
        hosts = (ANY_HOST,)  # as with a token: a page of another site cannot present one
    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port must be from 0 to 65535, got {args.port}")
    return Listen(args.host, args.port, token, hosts)


def bind_listen(listen: Listen) -> socket.socket:
    """`listen`'s address, bound now: before anything else of the server's may take its port
    (a local Dask cluster's random ports).

    Raises:
        UserError: The address cannot be bound (in use, not this machine's).
    """
    from headwater.serving.server import bind

    sock = bind(listen.host, listen.port)
    # Listening at once: on Linux another socket with SO_REUSEADDR (Tornado's) may still bind
    # a port that is bound but not listening. Connections wait in the backlog until served.
    sock.listen(2048)
    return sock


def run_app(app: Any, listen: Listen, *, announce: str, sock: socket.socket | None = None) -> None:
    """Bind `listen`'s address (unless `sock` is it, bound earlier), say where the app answers
    (`headwater: ANNOUNCE` on stderr, `{url}` in it replaced by the server's URL, with the port
    chosen for `--port 0`) and serve it with uvicorn until interrupted.

    Raises:
        UserError: The address cannot be bound (in use, not this machine's).
    """
    from headwater.ui._deps import require

    uvicorn = require("uvicorn")
    sock = sock or bind_listen(listen)
    bound = dataclasses.replace(listen, port=sock.getsockname()[1])
    print(f"headwater: {announce.format(url=bound.url)}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    # As `uvicorn.run`: Ctrl-C (raised again once the server has shut down) ends it cleanly,
    # and an app that failed to start (its error logged) exits 3.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    if not server.started:
        sys.exit(3)
