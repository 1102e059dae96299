"""`headwater ui`: serve the web dashboard and its JSON API over the metadata store.

Binds 127.0.0.1 unless told otherwise; a non-loopback --host needs --token (or
$HEADWATER_TOKEN), and then every page and API call must present it. A request naming the
server otherwise than by a loopback name (or an --allow-host NAME) is refused. Bad input is
one line on stderr and exit code 2. The web libraries are imported only when the command
runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.security import ALLOW_HOST_HELP, TOKEN_ENV, check_bind, hosts_for_bind, read_token


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `ui` on the CLI's subparsers."""
    ui = sub.add_parser(
        "ui",
        help="serve the web dashboard: runs, graphs, logs, artifacts, lineage",
        description="Serve the web dashboard and its JSON API (/api/v1) over the metadata store.",
    )
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    ui.add_argument(
        "--token",
        metavar="T",
        help=f"require this token on every request (default ${TOKEN_ENV}); needed for a "
        "non-loopback --host",
    )
    ui.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME", help=ALLOW_HOST_HELP
    )


def cmd_ui(args: argparse.Namespace) -> int:
    """`headwater ui`: serve until interrupted."""
    token = read_token(args.token)
    check_bind(args.host, token, exposes="see your runs")
    hosts = hosts_for_bind(args.host, args.allow_host)
    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port must be from 0 to 65535, got {args.port}")
    from headwater.ui import create_app
    from headwater.ui._deps import require

    app = create_app(metadata_url=args.metadata_url, token=token, allowed_hosts=hosts)
    uvicorn = require("uvicorn")
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"headwater: UI at http://{shown}:{args.port}/", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
