"""`headwater models list|show|promote`: the model registry, over `headwater.api.models`.

A name or version that is not registered, or a stage that does not exist, is one line on
stderr and exit code 2 (the API raises a `UserError`; `cli.main` prints it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from headwater.api import iso_time
from headwater.cli.inspect import _short, _table


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `models` and its subcommands on the CLI's subparsers."""
    models = sub.add_parser("models", help="the model registry: list, show and promote models")
    models_sub = models.add_subparsers(
        dest="models_command", required=True, parser_class=parser_class
    )
    ls = models_sub.add_parser("list", help="registered models, newest version first")
    ls.add_argument("--name", help="only this model's versions")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    show = models_sub.add_parser("show", help="one version of a model (default: the newest)")
    show.add_argument("name")
    show.add_argument("version", nargs="?", type=int, help="a version number (default: newest)")
    show.add_argument("--json", action="store_true")
    promote = models_sub.add_parser(
        "promote",
        help="move a version to a stage (production demotes the current production version)",
    )
    promote.add_argument("name")
    promote.add_argument("version", type=int)
    promote.add_argument(
        "--stage", required=True, metavar="STAGE", help="production, staging or none"
    )
    promote.add_argument("--json", action="store_true", help="print {model, demoted}")


def cmd_models(args: argparse.Namespace) -> int:
    """`headwater models list|show|promote`."""
    from headwater.api import models as api

    if args.models_command == "list":
        found = api.list_models(name=args.name, metadata=args.metadata_url)
        if args.json:
            print(json.dumps([m.to_json() for m in found], default=str))
            return 0
        if not found:
            print("no models registered", file=sys.stderr)
            return 0
        rows = [["NAME", "VERSION", "STAGE", "FRAMEWORK", "CREATED", "RUN", "METRICS", "URI"]]
        for m in found:
            rows.append([m.name, str(m.version), m.stage, m.framework, iso_time(m.created_at),
                         m.run_id or "", _short(m.metrics), m.uri])  # fmt: skip
        print(_table(rows))
        return 0
    if args.models_command == "show":
        model = api.get_model(args.name, args.version, metadata=args.metadata_url)
        if args.json:
            print(json.dumps(model.to_json(), default=str))
            return 0
        for key, value in model.to_json().items():
            shown = json.dumps(value, default=str) if isinstance(value, dict) else value
            print(f"{key:<17}{'' if shown is None else shown}")
        return 0
    done = api.promote_model(args.name, args.version, args.stage, metadata=args.metadata_url)
    if args.json:
        print(json.dumps(done.to_json(), default=str))
        return 0
    model = done.model
    print(f"model {model.name!r} version {model.version} is now in {model.stage}", file=sys.stderr)
    for old in done.demoted:
        print(
            f"model {old.name!r} version {old.version} moved from production to {old.stage}",
            file=sys.stderr,
        )
    return 0
