"""`headwater server tokens|users|audit`: who may use a team server, and what they did.

`tokens add NAME --namespace NS --role R` prints a new personal token once; the store keeps its
SHA-256 only (`headwater.access`). `users add` names a user that a trusted proxy identifies
(`headwater server --trusted-proxy`). Both go to the metadata store (`--metadata-url`, else the
default), which every server on it reads per request: `tokens revoke` takes effect on the next
request, on every server. The CLI's own changes are recorded in the audit log too, as
`cli:<login>`. `audit` prints the log back (`ui.audit`).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from headwater.errors import InvalidArgumentError

__all__ = ["add_parsers", "audit_path", "cmd_principals"]

_KINDS = {"tokens": "token", "users": "user"}


def add_parsers(
    server: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]
) -> None:
    """Register `tokens`, `users` and `audit` under `headwater server`."""
    sub = server.add_subparsers(
        dest="server_command",
        parser_class=parser_class,
        metavar="{tokens,users,namespaces,audit}",
        title="team commands (without one: serve)",
    )
    for group, kind in _KINDS.items():
        parser = sub.add_parser(
            group,
            help="manage the personal tokens of a team server (roles and namespaces)"
            if kind == "token"
            else "manage the users a trusted proxy names (--trusted-proxy)",
        )
        actions = parser.add_subparsers(dest="action", required=True, parser_class=parser_class)
        add = actions.add_parser(
            "add",
            help=f"add a {kind}" + (" and print its secret once" if kind == "token" else ""),
        )
        add.add_argument(
            "name",
            help="its name (who it is, e.g. alice)"
            if kind == "token"
            else "the user as the proxy's header names them (e.g. alice@example.com)",
        )
        add.add_argument(
            "--namespace",
            action="append",
            default=[],
            metavar="NS",
            help="a namespace it holds (repeatable; an admin holds every one)",
        )
        add.add_argument(
            "--role",
            required=True,
            choices=("viewer", "editor", "admin"),
            help="viewer reads; editor also creates, terminates, retries, archives and deletes; "
            "admin sees every namespace",
        )
        add.add_argument("--json", action="store_true", help="print JSON")
        listing = actions.add_parser("list", help=f"the {group} (never a secret)")
        listing.add_argument("--json", action="store_true", help="print a JSON list")
        remove = actions.add_parser(
            "revoke" if kind == "token" else "remove",
            help="revoke a token (refused on its next request, by every server)"
            if kind == "token"
            else "remove a user",
        )
        remove.add_argument("name")
    from headwater.cli.namespaces import add_parser as add_namespaces

    add_namespaces(sub, parser_class)
    audit = sub.add_parser("audit", help="print the audit log: who changed what, and the result")
    audit.add_argument(
        "--log",
        metavar="PATH",
        help="the audit log (default: the server's, $HEADWATER_HOME/server-logs/audit.jsonl)",
    )
    audit.add_argument("--principal", metavar="NAME", help="only this principal's records")
    audit.add_argument("--namespace", metavar="NS", help="only records in this namespace")
    audit.add_argument(
        "--since", metavar="TIME", help="only records from this UTC time on (2026-12-06T10:00)"
    )
    audit.add_argument("--limit", type=int, default=0, metavar="N", help="only the last N")
    audit.add_argument("--json", action="store_true", help="print JSON lines")


def audit_path(given: str | None = None) -> Path:
    """The audit log: `given`, else `$HEADWATER_HOME/server-logs/audit.jsonl`."""
    from headwater import config

    return Path(given) if given else config.home() / "server-logs" / "audit.jsonl"


def cmd_principals(args: argparse.Namespace) -> int:
    """`headwater server tokens|users ...` and `headwater server audit`."""
    if args.server_command == "audit":
        return _audit(args)
    from headwater import config
    from headwater.api import principals

    kind = _KINDS.get(args.server_command, "")
    # `headwater server --metadata-url URL tokens ...` names the store as the server takes it.
    url = getattr(args, "server_metadata_url", None) or args.metadata_url or config.metadata_url()
    if url == config.metadata_url():
        config.home().mkdir(parents=True, exist_ok=True)
    if args.server_command == "namespaces":
        from headwater.cli.namespaces import cmd_namespaces

        return cmd_namespaces(args, url)
    if args.action == "add":
        made = principals.add_principal(
            kind, args.name, args.role, args.namespace, created_by=_cli_principal(), metadata=url
        )
        _record(
            args, "POST", args.server_command, made.record.name, ",".join(made.record.namespaces)
        )
        return _added(made, args)
    if args.action == "list":
        return _list(principals.list_principals(kind, metadata=url), args)
    remain = principals.remove_principal(kind, args.name, metadata=url)
    _record(args, "DELETE", f"{args.server_command}/{args.name}", args.name)
    what = "revoked: it is refused from its next request on" if kind == "token" else "removed"
    print(f"{kind} {args.name} {what}")
    if not remain:
        print(
            "headwater: no tokens or users remain: running servers refuse every request "
            "but their --token's; restarted without --trusted-proxy, a server is "
            "single-user again (on loopback, or behind its --token)",
            file=sys.stderr,
        )
    return 0


def _added(made: Any, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(made.to_json(), indent=2))
        return 0
    found = made.record
    held = ", ".join(found.namespaces) or "every namespace"
    print(f"{found.kind} {found.name}: {found.role} of {held}")
    if made.token:
        print(made.token)
        print(
            "headwater: this token is shown once and stored only as a hash. Clients send it as "
            "'Authorization: Bearer TOKEN' (kfp.Client(existing_token=TOKEN)); the web UI "
            "takes it once as ?token=TOKEN",
            file=sys.stderr,
        )
    return 0


def _list(found: list[Any], args: argparse.Namespace) -> int:
    from headwater.api.principals import principal_json

    docs = [principal_json(p) for p in found]
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    if not docs:
        print(f"no {args.server_command}")
        return 0
    width = max(len(d["name"]) for d in docs)
    for d in docs:
        held = ", ".join(d["namespaces"]) or "(every namespace)"
        print(f"{d['name']:<{width}}  {d['role']:<6}  {held}  (added {d['created_at']})")
    return 0


def _cli_principal() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no login name (a container without a passwd entry)
        return "cli"


def _record(
    args: argparse.Namespace, method: str, route: str, resource: str, namespace: str = ""
) -> None:
    """Record a change the CLI made in the default audit log (as a request would be)."""
    import contextlib

    from headwater.ui.audit import AuditLog, audit_time

    with contextlib.suppress(Exception):  # the change is made: a log that cannot be written
        log = AuditLog(audit_path())
        try:
            log.write(
                {
                    "time": audit_time(),
                    "principal": _cli_principal(),
                    "kind": "cli",
                    "role": "admin",
                    "address": "",
                    "method": method,
                    "route": f"headwater server {route}",
                    "resource": resource,
                    "namespace": namespace,
                    "status": 200,
                    "result": "ok",
                }
            )
        finally:
            log.close()


def _audit(args: argparse.Namespace) -> int:
    from headwater.ui.audit import read_audit

    if args.limit < 0:
        raise InvalidArgumentError(f"--limit must be 0 (all) or more, got {args.limit}")
    since = _since(args.since) if args.since else ""
    records = [
        r
        for r in read_audit(audit_path(args.log))
        if (not args.principal or r.get("principal") == args.principal)
        and (not args.namespace or r.get("namespace") == args.namespace)
        and (not since or str(r.get("time", "")) >= since)
    ]
    if args.limit:
        records = records[-args.limit :]
    for r in records:
        if args.json:
            print(json.dumps(r))
            continue
        who = r.get("principal") or "(no one)"
        ns = f" [{r['namespace']}]" if r.get("namespace") else ""
        print(
            f"{r.get('time', '')}  {who}  {r.get('method', '')} {r.get('route', '')}{ns}  "
            f"{r.get('resource', '')}  {r.get('status', '')} {r.get('result', '')}".rstrip()
        )
    return 0


def _since(value: str) -> str:
    """`--since` as the log's times are written (ISO 8601 UTC), for comparing as text."""
    from datetime import datetime, timezone

    try:
        found = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(
            f"--since takes an ISO 8601 time (2026-12-06T10:00, or with Z), got {value!r}"
        ) from None
    if found.tzinfo is not None:
        found = found.astimezone(timezone.utc).replace(tzinfo=None)
    return found.strftime("%Y-%m-%dT%H:%M:%S")
