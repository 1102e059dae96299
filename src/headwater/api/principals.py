"""Who may use a team server: add, list and remove its principals (`headwater.access`).

`headwater server tokens|users` and the web UI's admin API (`/api/v1/principals`) both call
these. A token's secret is returned once, by `add_principal`, and never stored: the store keeps
its SHA-256.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from headwater.access import ROLES, check_namespace, check_principal_name, hash_token, new_token
from headwater.api import iso_time
from headwater.api._store import MetadataArg, reading
from headwater.errors import InvalidArgumentError
from headwater.metadata.base import MetadataStore, PrincipalRecord

__all__ = ["KINDS", "NewPrincipal", "add_principal", "list_principals", "remove_principal"]

#: The kinds of principal the store keeps.
KINDS = ("token", "user")


@dataclass(frozen=True)
class NewPrincipal:
    """A principal just added, with its token's secret (None for a user): shown once."""

    record: PrincipalRecord
    token: str | None

    def to_json(self) -> dict[str, Any]:
        doc = principal_json(self.record)
        if self.token is not None:
            doc["token"] = self.token
        return doc


def principal_json(found: PrincipalRecord) -> dict[str, Any]:
    """A principal as JSON, without any secret."""
    return {
        "kind": found.kind,
        "name": found.name,
        "role": found.role,
        "namespaces": list(found.namespaces),
        "created_at": iso_time(found.created_at),
        "created_by": found.created_by,
    }


def add_principal(
    kind: str,
    name: str,
    role: str,
    namespaces: list[str] | tuple[str, ...] = (),
    *,
    created_by: str,
    metadata: MetadataArg = None,
) -> NewPrincipal:
    """Add a personal token (a new secret) or a user a trusted proxy names.

    Raises:
        InvalidArgumentError: An unknown kind or role, a bad name or namespace, or a viewer or
            editor without a namespace.
        ConflictError: One of that kind has that name.
    """
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind {kind!r}: token or user")
    if role not in ROLES:
        raise InvalidArgumentError(f"role {role!r}: one of {', '.join(ROLES)}")
    name = check_principal_name(name, kind=kind)
    held = tuple(dict.fromkeys(check_namespace(str(ns)) for ns in namespaces))
    if not held and role != "admin":
        article = "an" if role == "editor" else "a"
        raise InvalidArgumentError(
            f"{article} {role} needs a namespace: --namespace NS (repeatable); an admin holds all"
        )
    secret = new_token() if kind == "token" else None
    record = PrincipalRecord(
        kind=kind,
        name=name,
        role=role,
        namespaces=held,
        token_hash=hash_token(secret) if secret else None,
        created_at=time.time(),
        created_by=created_by,
    )
    with _changing(metadata) as store:
        store.add_principal(record)
    return NewPrincipal(record, secret)


def list_principals(
    kind: str | None = None, *, metadata: MetadataArg = None
) -> list[PrincipalRecord]:
    """The tokens and users (or those of `kind`), by kind and name; never a secret."""
    with reading(metadata) as store:
        return [] if store is None else store.list_principals(kind)


def remove_principal(kind: str, name: str, *, metadata: MetadataArg = None) -> bool:
    """Revoke a token or remove a user; True if principals remain.

    Raises:
        NotFoundError: There is no such principal.
    """
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind {kind!r}: token or user")
    with _changing(metadata) as store:
        store.remove_principal(kind, name)
        return store.has_principals()


def has_principals(metadata: str | None, *, upgrade: bool = False) -> bool:
    """True if the store at `metadata` (None: the default) has tokens or users (a server on
    it is multi-user); with `upgrade`, the store is made or migrated first (as a server does),
    else only read."""
    from headwater.metadata import open_reader, open_store

    store = open_store(metadata) if upgrade else open_reader(metadata)
    if store is None:
        return False
    try:
        return store.has_principals()
    finally:
        store.close()


@contextlib.contextmanager
def _changing(metadata: MetadataArg) -> Iterator[MetadataStore]:
    """The store to change: the one given, left open; else opened (made or migrated, as the
    first principal of a new server's store is added before the server starts) and closed."""
    from headwater.metadata import open_store

    if isinstance(metadata, MetadataStore):
        yield metadata
        return
    store = open_store(metadata)
    try:
        yield store
    finally:
        store.close()
