"""`headwater ui`: serve the web dashboard and its JSON API over the metadata store.

Binds 127.0.0.1 unless told otherwise; a non-loopback --host needs --token (or
$HEADWATER_TOKEN), and then every page and API call must present it. A request naming the
server otherwise than by a loopback name (or an --allow-host NAME) is refused. Bad input is
one line on stderr and exit code 2. The web libraries are imported only when the command
runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from headwater.cli.listen import add_listen_options, listen_options, max_body_bytes, run_app


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `ui` on the CLI's subparsers."""
    ui = sub.add_parser(
        "ui",
        help="serve the web dashboard: runs, graphs, logs, artifacts, lineage",
        description="Serve the web dashboard and its JSON API (/api/v1) over the metadata store.",
    )
    add_listen_options(
        ui, port=8080, token_help="require this token on every request", body_limit=True
    )


def cmd_ui(args: argparse.Namespace) -> int:
    """`headwater ui`: serve until interrupted. A store with personal tokens or users (`headwater
    server tokens`) makes it multi-user as `headwater server` is: each request needs one."""
    from headwater.api.principals import has_principals

    listen = listen_options(
        args, exposes="see your runs", guarded=has_principals(args.metadata_url)
    )
    limit = max_body_bytes(args)
    from headwater.ui import create_app

    app = create_app(
        metadata_url=args.metadata_url,
        token=listen.token,
        allowed_hosts=listen.hosts,
        max_body_bytes=limit,
    )
    run_app(app, listen, announce="UI at {url}/")
    return 0
