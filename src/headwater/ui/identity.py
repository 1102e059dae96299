"""`Gate`: what credentials are worth on `headwater server` and `headwater ui`
(`security.Identify` calls it for every request).

A server is multi-user (`headwater.access`) when its store has principals (tokens or users),
or had them since it started, or it trusts a proxy. Every request then needs a principal, and
every lookup is a read of the store: a token revoked by any server, or by the CLI, on the same
database is refused on the next request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from headwater.access import ANONYMOUS, SERVER_TOKEN_NAME, Principal, hash_token
from headwater.errors import PermissionDeniedError
from headwater.security import tokens_match

if TYPE_CHECKING:
    from headwater.metadata.base import MetadataStore

__all__ = ["Gate"]


class Gate:
    """The principals of one server.

    Args:
        store: Opens (once) the store the principals are read from; None when it does not
            exist yet (no principals).
        server_token: The server's own token (`--token`): an admin.
        trusted_proxy: The server trusts a proxy's user header (multi-user without tokens).
    """

    def __init__(
        self,
        store: Callable[[], MetadataStore | None],
        server_token: str | None = None,
        *,
        trusted_proxy: bool = False,
    ) -> None:
        self._open = store
        self._store: MetadataStore | None = None
        self._lock = threading.Lock()
        self.server_token = server_token
        self.trusted_proxy = trusted_proxy
        self._multi_user = False

    def store(self) -> MetadataStore | None:
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = self._open()
        return self._store

    def multi_user(self) -> bool:
        """True if requests must name a principal and namespaces isolate: the store has
        principals, or had them since this server started (revoking the last token does not
        open a server to everyone; a restart without principals does, on loopback only).
        """
        if self.trusted_proxy or self._multi_user:
            return True
        store = self.store()
        self._multi_user = store is not None and store.has_principals()
        return self._multi_user

    def identify(self, token: str | None, user: str | None) -> Principal | None:
        """The principal of a request's credentials (see `security.Identifier`); None to
        refuse it.

        Raises:
            PermissionDeniedError: A trusted proxy named a user no one added.
        """
        store = self.store()
        if user is not None:
            found = None if store is None else store.get_principal("user", user)
            if found is None:
                raise PermissionDeniedError(
                    f"user {user!r} (named by the trusted proxy) is not known to this server: an "
                    f"admin adds them with 'headwater server users add {user} --namespace NS "
                    "--role viewer|editor|admin'"
                )
            return Principal.of("user", found.name, found.role, found.namespaces)
        if token is not None and self.server_token and tokens_match(token, self.server_token):
            return Principal.of(
                "server-token", SERVER_TOKEN_NAME, "admin", (), multi_user=self.multi_user()
            )
        if token:
            found = None if store is None else store.principal_by_token(hash_token(token))
            if found is not None:
                return Principal.of("token", found.name, found.role, found.namespaces)
        if not self.server_token and not self.multi_user():
            return (
                ANONYMOUS  # a server without principals is open (on loopback): any token is ignored
            )
        return None
