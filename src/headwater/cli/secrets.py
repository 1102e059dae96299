"""`headwater secrets set|list|delete`: the local secrets and config maps tasks are given.

A pipeline that uses `kubernetes.use_secret_as_env(task, "db", {"password": "PW"})` reads key
`password` of secret `db` from `$HEADWATER_HOME/secrets/db/password`; these commands manage
that store (and, with `--config-map`, the config maps beside it). Values are never printed.
On a multi-user server a run gets its namespace's own (`--namespace NS`:
`$HEADWATER_HOME/namespaces/NS/secrets`), never another namespace's or the machine's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater import config
from headwater.errors import UserError

if TYPE_CHECKING:
    from headwater.platform.secrets import LocalSecretStore


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `secrets` and its subcommands on the CLI's subparsers."""
    secrets = sub.add_parser(
        "secrets", help="manage the secrets and config maps that kfp-kubernetes settings use"
    )
    secrets_sub = secrets.add_subparsers(
        dest="secrets_command", required=True, parser_class=parser_class
    )
    kind = argparse.ArgumentParser(add_help=False)
    kind.add_argument(
        "--config-map",
        action="store_true",
        help="a config map ($HEADWATER_HOME/configmaps) instead of a secret",
    )
    kind.add_argument(
        "--namespace",
        metavar="NS",
        help="a namespace's own (its runs on a multi-user server get only theirs: "
        "$HEADWATER_HOME/namespaces/NS/secrets)",
    )
    set_ = secrets_sub.add_parser(
        "set",
        parents=[kind],
        help="add or replace keys of a secret (other keys stay)",
        description="Add or replace keys of a secret. KEY=VALUE sets a value; a lone KEY reads "
        "its value from standard input (exact bytes: use printf, not echo); --from-file "
        "KEY=PATH reads a file.",
    )
    set_.add_argument("name", help="the secret's name, as the pipeline names it")
    set_.add_argument("items", nargs="*", metavar="KEY=VALUE", help="a key and its value")
    set_.add_argument(
        "--from-file",
        action="append",
        default=[],
        metavar="KEY=PATH",
        help="a key whose value is the bytes of PATH (repeatable)",
    )
    ls = secrets_sub.add_parser(
        "list", parents=[kind], help="secret names and their keys (never values)"
    )
    ls.add_argument("name", nargs="?", help="only this secret's keys")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    delete = secrets_sub.add_parser(
        "delete", parents=[kind], help="delete a secret, or some of its keys"
    )
    delete.add_argument("name")
    delete.add_argument("keys", nargs="*", metavar="KEY", help="only these keys")


def cmd_secrets(args: argparse.Namespace) -> int:
    """Run `headwater secrets ...`; return the exit code."""
    # Imported here, not at the top: every CLI start builds the parser, few run this.
    from headwater.platform.secrets import CONFIG_MAP, SECRET, LocalSecretStore

    kind = CONFIG_MAP if args.config_map else SECRET
    home = config.home()
    if args.namespace:
        from headwater.access import check_namespace

        home = config.namespace_home(check_namespace(args.namespace))
    store = LocalSecretStore.for_home(home, kind)
    try:
        return _run(args, store, kind)
    except OSError as exc:
        where = exc.filename or store.root
        raise UserError(f"cannot use the {kind} store: {where}: {exc.strerror or exc}") from exc


def _run(args: argparse.Namespace, store: LocalSecretStore, kind: str) -> int:
    if args.secrets_command == "set":
        items = _items(args.items, args.from_file, kind)
        store.set(args.name, items)
        keys = ", ".join(sorted(items))
        print(
            f"headwater: {kind} {args.name!r}: set {keys} (in {store.path(args.name)})",
            file=sys.stderr,
        )
    elif args.secrets_command == "list":
        if args.name:
            listed = [{"name": args.name, "keys": store.keys(args.name)}]
        else:
            listed = [{"name": name, "keys": store.keys(name)} for name in store.names()]
        if args.json:
            print(json.dumps(listed))
        else:
            for entry in listed:
                print(f"{entry['name']}\t{', '.join(entry['keys'])}")
    else:
        store.delete(args.name, args.keys)
        what = f"keys {', '.join(args.keys)} of " if args.keys else ""
        print(f"headwater: deleted {what}{kind} {args.name!r}", file=sys.stderr)
    return 0


def _items(pairs: list[str], files: list[str], kind: str) -> dict[str, bytes]:
    """The keys and values of `secrets set`, from its arguments, files and standard input."""
    items: dict[str, bytes] = {}
    from_stdin = [p for p in pairs if "=" not in p]
    if len(from_stdin) > 1:
        raise UserError(
            f"only one key can read its value from standard input, got {', '.join(from_stdin)}: "
            "give the others as KEY=VALUE or --from-file KEY=PATH"
        )
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            items[key] = sys.stdin.buffer.read()
        else:
            items[key] = value.encode()
    for pair in files:
        key, sep, path = pair.partition("=")
        if not sep or not key or not path:
            raise UserError(f"--from-file expects KEY=PATH, got {pair!r}")
        try:
            items[key] = Path(path).read_bytes()
        except OSError as exc:
            raise UserError(f"--from-file {key}: cannot read {path!r}: {exc.strerror}") from exc
    if not items:
        raise UserError(f"secrets set needs at least one KEY=VALUE for the {kind}")
    return items
