"""Who is who on a team server (`headwater server`): principals, their roles and namespaces.

A principal is a personal token (`headwater server tokens add`), a user whom a trusted proxy
names in a header (`headwater server users add`), or the server's own token (`--token`,
`$HEADWATER_TOKEN`), which is an admin. Tokens are stored as the SHA-256 of their secret only
(`token_hash`): a token is 32 random bytes, so a fast hash cannot be searched back, and a
request's token is found by one indexed read.

As Kubeflow Pipelines' multi-user mode, with principals the server is multi-user: every
request names one, and each run, experiment, recurring run and pipeline lives in a
namespace. Roles, each holding its namespaces (an admin holds all):

- viewer: reads;
- editor: also creates, terminates, retries, archives and deletes;
- admin: every namespace, and the tokens and users.

Pipelines without a namespace are shared: every principal reads them.

This module is the rules only (no web library, no store): `security.Identify` finds the
principal of a request, the routes ask it (`Principal.check`, `Principal.list_namespaces`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from headwater.errors import InvalidArgumentError, PermissionDeniedError

__all__ = [
    "ANONYMOUS",
    "ROLES",
    "SERVER_TOKEN_NAME",
    "TOKEN_PREFIX",
    "Principal",
    "check_namespace",
    "check_principal_name",
    "hash_token",
    "new_token",
]

#: The roles, each allowing what the one before it does and more.
ROLES = ("viewer", "editor", "admin")
#: How a personal token begins (so that a leaked one is recognised, as GitHub's `ghp_`).
TOKEN_PREFIX = "hwt_"
#: The name the server's own token (`--token`) acts under.
SERVER_TOKEN_NAME = "server-token"
_NAMESPACE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+:-]{0,253}")


def new_token() -> str:
    """A new personal token: the prefix and 32 random bytes, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What the store keeps of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_namespace(namespace: str) -> str:
    """`namespace`, checked to be a namespace name (as Kubernetes': lower-case letters,
    digits and '-', at most 63).

    Raises:
        InvalidArgumentError: It is not.
    """
    if not _NAMESPACE.fullmatch(namespace):
        raise InvalidArgumentError(
            f"namespace {namespace!r} is not a namespace name: lower-case letters, digits and "
            "'-', starting and ending with a letter or digit, at most 63 (e.g. team-a)"
        )
    return namespace


def check_principal_name(name: str, *, kind: str = "token") -> str:
    """`name`, checked to be a token's or a user's name (a user's is what the proxy sends).

    Raises:
        InvalidArgumentError: It is not, or it is the server token's own name.
    """
    if not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"{kind} name {name!r}: letters, digits and . _ @ + : -, starting with a letter or "
            "digit, at most 254 (e.g. alice, or alice@example.com)"
        )
    if name == SERVER_TOKEN_NAME:
        raise InvalidArgumentError(
            f"{kind} name {name!r} is the server token's own (--token): choose another"
        )
    return name


@dataclass(frozen=True)
class Principal:
    """Who sent a request, and what they may do.

    Attributes:
        name: The token's or user's name ("" for anyone, on a server without principals).
        role: One of `ROLES`.
        namespaces: The namespaces held (an admin holds every one).
        kind: "token", "user", "server-token" or "anyone".
        multi_user: The server has principals: namespaces isolate.
    """

    name: str
    role: str
    namespaces: frozenset[str] = field(default_factory=frozenset)
    kind: str = "token"
    multi_user: bool = True

    @property
    def is_admin(self) -> bool:
        return self.role == "admin" or not self.multi_user

    @property
    def created_by(self) -> str | None:
        """What a record this principal makes keeps as its creator (None: no one known)."""
        return self.name or None

    def holds(self, namespace: str) -> bool:
        """True if this principal may read `namespace`."""
        return self.is_admin or namespace in self.namespaces

    def may_change(self) -> bool:
        """True if the role allows changes (editor, admin)."""
        return not self.multi_user or self.role in ("editor", "admin")

    def check(self, namespace: str, *, write: bool = False, what: str = "this") -> None:
        """Allow reading (or, with `write`, changing) `what`, which is in `namespace`.

        Raises:
            PermissionDeniedError: The namespace is not held, or the role is viewer and
                `write` is asked.
        """
        if not self.holds(namespace):
            held = ", ".join(sorted(self.namespaces)) or "none"
            where = f"namespace {namespace!r}" if namespace else "no namespace (admins only)"
            raise PermissionDeniedError(
                f"Failed to access {what}. Check if you have access to {where}: "
                f"{self.describe()} holds {held}"
            )
        if write:
            self.check_role(what)

    def check_role(self, what: str = "this") -> None:
        """Allow a change at all (any namespace).

        Raises:
            PermissionDeniedError: The role is viewer.
        """
        if not self.may_change():
            raise PermissionDeniedError(
                f"{self.describe()} is a viewer and may not change {what}: ask an admin for "
                "the editor role"
            )

    def check_admin(self, what: str) -> None:
        """Allow an admin's change.

        Raises:
            PermissionDeniedError: This principal is not an admin.
        """
        if not self.is_admin:
            raise PermissionDeniedError(f"only an admin may {what}; {self.describe()} is not")

    def list_namespaces(self, requested: str = "") -> list[str] | None:
        """The namespaces a list shows: `requested` (checked), else every one held (None: no
        filter, for an admin or a server without principals).

        Raises:
            PermissionDeniedError: `requested` is not held.
        """
        if requested:
            self.check(requested, what=f"the lists of namespace {requested!r}")
            return [requested]
        return None if self.is_admin else sorted(self.namespaces)

    def default_namespace(self, given: str, what: str) -> str:
        """The namespace a new `what` goes to: `given`, else the only one held.

        Raises:
            InvalidArgumentError: None is given and the principal holds several (or none),
                on a multi-user server (as KFP: "cannot have an empty namespace").
        """
        if given or not self.multi_user:
            return given
        if len(self.namespaces) == 1 and not self.is_admin:
            return next(iter(self.namespaces))
        if self.is_admin:
            return ""
        held = ", ".join(sorted(self.namespaces)) or "none"
        raise InvalidArgumentError(
            f"{what} cannot have an empty namespace in multi-user mode: name one "
            f"(namespace=...); {self.describe()} holds {held}"
        )

    def describe(self) -> str:
        """How messages name this principal ("token alice (editor)")."""
        if self.kind == "anyone":
            return "anyone"
        return f"{self.kind} {self.name} ({self.role})"

    @classmethod
    def of(
        cls, kind: str, name: str, role: str, namespaces: Iterable[str], *, multi_user: bool = True
    ) -> Principal:
        return cls(name, role, frozenset(namespaces), kind, multi_user)


#: Everyone, on a server without principals (loopback, or its own token): may do anything.
ANONYMOUS = Principal("", "admin", frozenset(), "anyone", multi_user=False)
