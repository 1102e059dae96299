"""`headwater endpoints list|stop`: the model servers `deploy_model` started.

An unknown name is one line on stderr and exit code 2 (the API raises a `UserError`;
`cli.main` prints it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from headwater.api import iso_time
from headwater.cli.inspect import _table
from headwater.errors import InvalidArgumentError


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `endpoints` and its subcommands on the CLI's subparsers."""
    endpoints = sub.add_parser(
        "endpoints", help="model servers deployed by deploy_model: list and stop them"
    )
    endpoints_sub = endpoints.add_subparsers(
        dest="endpoints_command", required=True, parser_class=parser_class
    )
    ls = endpoints_sub.add_parser("list", help="deployed endpoints and whether they are up")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    stop = endpoints_sub.add_parser(
        "stop", help="stop endpoints' servers (requests in flight are answered first)"
    )
    stop.add_argument("names", nargs="*", metavar="NAME")
    stop.add_argument("--all", action="store_true", help="stop every running endpoint")


def cmd_endpoints(args: argparse.Namespace) -> int:
    """`headwater endpoints list|stop`."""
    from headwater import endpoints as api

    if args.endpoints_command == "list":
        found = api.list_endpoints(metadata=args.metadata_url)
        if args.json:
            print(json.dumps([e.to_json() for e in found], default=str))
            return 0
        if not found:
            print("no endpoints deployed", file=sys.stderr)
            return 0
        rows = [["NAME", "STATE", "URL", "MODEL", "VERSION", "PID", "RUN", "UPDATED"]]
        for e in found:
            model = e.models[0] if e.models else {}
            what = model.get("registered") or model.get("uri") or ""
            rows.append([e.name, e.state, e.url, str(what), str(model.get("version", "")),
                         str(e.pid), e.run_id or "", iso_time(e.updated_at)])  # fmt: skip
        print(_table(rows))
        return 0
    names = list(args.names)
    if args.all == bool(names):
        raise InvalidArgumentError("give endpoint names to stop, or --all (not both)")
    if args.all:
        names = [e.name for e in api.list_endpoints(metadata=args.metadata_url)
                 if e.state == "running"]  # fmt: skip
    for name in names:
        _, stopped = api.stop_endpoint(name, metadata=args.metadata_url)
        said = "stopped" if stopped else "was not running"
        print(f"endpoint {name!r} {said}", file=sys.stderr)
    return 0
