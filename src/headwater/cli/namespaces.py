"""`headwater server namespaces set|list|unset`: what a namespace of a team server has of its own.

A namespace's runs write their artifacts under a root of their own: the one an admin gives it
(`--pipeline-root`), else the namespace's folder of the server's root. Its sandboxed tasks get
the keys of its storage secret (`--secret NAME`, a secret of the namespace's own, set with
`headwater secrets set --namespace NS NAME KEY=VALUE`) as variables, such as
`AWS_ACCESS_KEY_ID`: they never receive the server's storage credentials. The settings go to
the metadata store, which every server on it reads when a run starts.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from headwater.errors import InvalidArgumentError

__all__ = ["add_parser", "cmd_namespaces"]


def add_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `namespaces` on `headwater server`'s subcommands."""
    parser = sub.add_parser(
        "namespaces", help="set what a namespace has of its own: pipeline root, storage secret"
    )
    actions = parser.add_subparsers(dest="action", required=True, parser_class=parser_class)
    put = actions.add_parser(
        "set", help="give a namespace its own pipeline root and storage credentials"
    )
    put.add_argument("namespace", help="the namespace (as tokens and users hold it)")
    put.add_argument(
        "--pipeline-root",
        default="",
        metavar="URI",
        help="where its runs write artifacts (a folder, s3://..., gs://...); default the "
        "namespace's folder of the server's root",
    )
    put.add_argument(
        "--secret",
        default="",
        metavar="NAME",
        help="the namespace's secret whose keys its tasks get as variables (AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY...): its storage credentials",
    )
    listing = actions.add_parser("list", help="every namespace's settings")
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    unset = actions.add_parser("unset", help="forget a namespace's settings (its runs stay)")
    unset.add_argument("namespace")


def cmd_namespaces(args: argparse.Namespace, url: str) -> int:
    """Run `headwater server namespaces ...` on the store at `url`."""
    from headwater.metadata import open_store

    store = open_store(url)
    try:
        if args.action == "set":
            return _set(store, args)
        if args.action == "list":
            return _list(store, args)
        store.remove_namespace(args.namespace)
        print(f"namespace {args.namespace}: settings removed (its runs and artifacts stay)")
        return 0
    finally:
        store.close()


def _set(store: Any, args: argparse.Namespace) -> int:
    from headwater import config
    from headwater.access import check_namespace
    from headwater.artifacts import store_for
    from headwater.metadata.base import NamespaceRecord
    from headwater.platform.secrets import LocalSecretStore, check_name

    namespace = check_namespace(args.namespace)
    root = ""
    if args.pipeline_root:
        from headwater.artifacts.fsspec_store import SHARED_SCHEMES
        from headwater.paths import scheme_of

        chosen = store_for(args.pipeline_root)  # a bad URI: one line, exit 2
        if scheme_of(chosen.root) not in SHARED_SCHEMES:
            raise InvalidArgumentError(
                f"--pipeline-root {args.pipeline_root!r}: a namespace's runs need a root every "
                "task reaches (a folder, s3://..., gs://...)"
            )
        root = chosen.root
    if args.secret:
        check_name(args.secret)
        secrets = LocalSecretStore.for_home(config.namespace_home(namespace))
        if not secrets.exists(args.secret):
            raise InvalidArgumentError(
                f"namespace {namespace!r} has no secret {args.secret!r}: set it first with "
                f"`headwater secrets set --namespace {namespace} {args.secret} KEY=VALUE...`"
            )
    store.put_namespace(
        NamespaceRecord(namespace, root, args.secret, updated_at=time.time(), updated_by=_who())
    )
    print(
        f"namespace {namespace}: pipeline root {root or '(the server root/' + namespace + ')'}, "
        f"storage secret {args.secret or '(none)'}"
    )
    return 0


def _list(store: Any, args: argparse.Namespace) -> int:
    found = store.list_namespace_settings()
    if args.json:
        print(json.dumps([vars(record) for record in found], indent=2))
        return 0
    for record in found:
        root = record.pipeline_root or "(server root/namespace)"
        print(f"{record.name}\t{root}\t{record.storage_secret or '-'}")
    return 0


def _who() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"
